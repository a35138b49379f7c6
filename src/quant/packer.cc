#include "quant/packer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>

#include "core/escape.h"
#include "core/half.h"
#include "format/gguf/dequant.h"
#include "format/gguf/gguf.h"
#include "format/gguf/gguf_writer.h"
#include "format/orkpack/orkpack.h"
#include "format/orkpack/orkpack_image.h"
#include "quant/carry.h"
#include "quant/gptq.h"
#include "quant/imatrix.h"

namespace ork {
namespace {

// Matrices take a planned tier; vectors (norms, biases) stay f32, and so
// do the small recurrent parameters that no matmul reads: a convolution's
// kernel, a few taps per channel (lfm2's shortconv.conv, qwen35's
// ssm_conv1d).
bool is_matrix(const GgufTensorInfo& t) {
  auto ends_with = [&](std::string_view suffix) {
    return t.name.size() >= suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const bool conv_kernel = ends_with("shortconv.conv.weight") || ends_with("ssm_conv1d.weight");
  return t.dims.size() >= 2 && t.rows() >= 2 && !conv_kernel;
}

// token_embd is read by row lookup (and is the output matrix only when
// tied). Lookups could un-rotate the row they read, but on tinystories656K
// a rotated tied embedding measured worse end to end (KLD 0.0917 vs 0.0895
// at 4.49 bpw with an imatrix) although its weighted error was lower, so
// it stays unrotated.
bool may_rotate(const GgufTensorInfo& t) { return is_matrix(t) && t.name != "token_embd.weight"; }

// One tensor widened to f32, rows padded to k_stored (and rotated if asked).
std::vector<float> load_rows(const GgufTensorInfo& t, int64_t k_stored, bool rotated, uint64_t seed,
                             const std::vector<int64_t>* only_rows = nullptr) {
  const auto k = static_cast<int64_t>(t.ne(0));
  const int64_t n = only_rows != nullptr ? static_cast<int64_t>(only_rows->size()) : static_cast<int64_t>(t.rows());
  const uint64_t row_bytes = t.bytes / t.rows();
  std::vector<float> out(static_cast<size_t>(n * k_stored), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = only_rows != nullptr ? (*only_rows)[static_cast<size_t>(i)] : i;
    float* row = &out[static_cast<size_t>(i * k_stored)];
    (void)dequantize(t.type, t.data + static_cast<uint64_t>(r) * row_bytes, row, k);
    if (rotated) rotate(row, k_stored, rotation_block(k_stored), seed);
  }
  return out;
}

// Weights that are not finite would quantize to garbage scales and pass
// NaN through every token: refused, naming the tensor and the place.
Status check_finite(const std::string& file, const GgufTensorInfo& t, const std::vector<float>& w, int64_t k_stored,
                    const std::vector<int64_t>* rows = nullptr) {
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isfinite(w[i])) continue;
    const auto r = static_cast<int64_t>(i) / k_stored;
    return error(StatusCode::kCorrupt, "{}: tensor '{}' holds {} in row {}: ork refuses weights that are not finite",
                 file, escape_text(t.name), w[i], rows != nullptr ? (*rows)[static_cast<size_t>(r)] : r);
  }
  return Status::ok();
}

// Importance in the basis the tensor is stored in (k_stored values), or
// empty for uniform.
std::vector<float> importance_for(const PackOptions& o, const GgufTensorInfo& t, int64_t k_stored, bool rotated) {
  if (o.imatrix == nullptr) return {};
  const ImportanceVectors* v = o.imatrix->find(t.name);
  if (v == nullptr) return {};
  std::vector<float> imp = rotated ? v->rotated : v->raw;
  if (imp.size() > static_cast<size_t>(k_stored)) return {};
  imp.resize(static_cast<size_t>(k_stored), 0.0f);
  // Floor at a small fraction of the mean so no column is ignored entirely.
  double mean = 0;
  for (float x : imp) mean += x;
  mean /= static_cast<double>(imp.size());
  for (float& x : imp) x = std::max(x, static_cast<float>(1e-3 * mean));
  return imp;
}

// GPTQ and the Hessian error need at least this many calibration rows per
// input column (an expert's: the tokens routed to it). One is the rank
// bound; two measured worse on sotu-moe with 16 windows (KLD 0.0061 against
// 0.0050: it also turned away experts that GPTQ helped), the same on 64.
constexpr int64_t kGptqRowsPerColumn = 1;

// The input second moments H = E[x x^T] of a weight in its stored basis,
// and R, the upper-triangular factor of the damped H (H = R R^T), for GPTQ.
struct Hessian {
  int64_t k = 0;
  std::vector<float> hf;  // H, undamped, k x k (it came from floats), for hessian_error
  std::vector<double> r;  // k x k, upper triangle used
};

std::optional<Hessian> hessian_for(const PackOptions& o, const GgufTensorInfo& t, int64_t ks, bool rotated) {
  // token_embd is read row by row as an embedding: GPTQ trades each weight's
  // own error for the matmul output's, which ruins lookups (measured on
  // tinystories656K's tied embedding at i4: KLD 0.056 -> 0.126). The output
  // matrix's error is the logits' own, where GPTQ's squared error is not the
  // KL divergence that counts: sotu-moe's pack measured 0.0047 with GPTQ
  // there and 0.0044 without (64 windows; 0.0064 and 0.0050 on 16).
  if (o.imatrix == nullptr || !o.gptq || t.name == "token_embd.weight" || t.name == "output.weight") {
    return std::nullopt;
  }
  const ImportanceVectors* v = o.imatrix->find(t.name);
  const auto k = static_cast<int64_t>(t.ne(0));
  if (v == nullptr || v->cov_lower.size() != ImportanceVectors::lower_size(k)) return std::nullopt;
  // Second moments from fewer rows than columns are singular: GPTQ would
  // push the rounding error into directions the calibration never saw
  // (sotu-moe, 64 windows: the output matrix, then seen one row a window,
  // took the pack from KLD 0.0044 to 0.0088). An older file's count is 0:
  // unknown, trusted as before.
  if (v->count > 0 && v->count < static_cast<uint64_t>(kGptqRowsPerColumn * k)) return std::nullopt;
  std::vector<float> m(static_cast<size_t>(ks * ks), 0.0f);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) m[static_cast<size_t>(i * ks + j)] = v->cov_lower[ImportanceVectors::lower_at(i, j)];
  }
  if (rotated) {
    // R M R^T: rotate every row (M R^T), transpose, rotate every row again.
    const int block = rotation_block(ks);
    for (int pass = 0; pass < 2; ++pass) {
      for (int64_t i = 0; i < ks; ++i) rotate(&m[static_cast<size_t>(i * ks)], ks, block, o.rotation_seed);
      for (int64_t i = 0; i < ks; ++i) {
        for (int64_t j = i + 1; j < ks; ++j) std::swap(m[static_cast<size_t>(i * ks + j)], m[static_cast<size_t>(j * ks + i)]);
      }
    }
  }
  Hessian hs;
  hs.k = ks;
  std::vector<double> r = gptq_factor(std::vector<double>(m.begin(), m.end()), ks);
  hs.hf = std::move(m);
  if (r.empty()) return std::nullopt;
  hs.r = std::move(r);
  return hs;
}

// sum over rows of d^T H d, d = w - w': the expected squared output error.
// H is symmetric: d^T H d = sum_i d_i (H_ii d_i + 2 sum_{j<i} H_ij d_j), so
// only the lower triangle is read, as floats (H came from floats), by eight
// rows at once, each row of H met by the eight d's in one pass (eight
// independent sums, each in order); every inner sum is a float dot of at
// most k terms, the total a double.
// (Element by element and in double, row after row, this was most of a
// GPTQ pack's measuring: k^2 sequential multiply-adds per row per tier.)
double hessian_error(const std::vector<float>& w, const std::vector<float>& recon, const Hessian& hs) {
  const int64_t k = hs.k;
  const int64_t rows = static_cast<int64_t>(w.size()) / k;
  constexpr int kRows = 8;
  std::vector<float> d(static_cast<size_t>(kRows * k));
  double total = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int64_t n = std::min<int64_t>(kRows, rows - r0);
    std::fill(d.begin(), d.end(), 0.0f);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t j = 0; j < k; ++j) {
        const size_t at = static_cast<size_t>((r0 + r) * k + j);
        d[static_cast<size_t>(r * k + j)] = w[at] - recon[at];
      }
    }
    const float *d0 = d.data(), *d1 = d0 + k, *d2 = d1 + k, *d3 = d2 + k, *d4 = d3 + k, *d5 = d4 + k, *d6 = d5 + k,
                *d7 = d6 + k;
    for (int64_t i = 0; i < k; ++i) {
      const float* hi = hs.hf.data() + i * k;
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
      for (int64_t j = 0; j < i; ++j) {
        const float h = hi[j];
        s0 += h * d0[j];
        s1 += h * d1[j];
        s2 += h * d2[j];
        s3 += h * d3[j];
        s4 += h * d4[j];
        s5 += h * d5[j];
        s6 += h * d6[j];
        s7 += h * d7[j];
      }
      const float sums[kRows] = {s0, s1, s2, s3, s4, s5, s6, s7};
      for (int r = 0; r < kRows; ++r) {
        const double di = d[static_cast<size_t>(r * k + i)];
        total += di * (static_cast<double>(hi[i]) * di + 2.0 * static_cast<double>(sums[r]));
      }
    }
  }
  return total;
}

// Quantizes rows (GPTQ when a Hessian is given) and returns the error the
// planner compares: the Hessian error if known, else the importance-weighted one.
double quantize_measured(Tier tier, const std::vector<float>& w, const std::vector<float>& imp, int64_t rows,
                         int64_t ks, const std::optional<Hessian>& hs, uint8_t* data, float* scales) {
  const double err = quantize_tier(tier, w.data(), imp.empty() ? nullptr : imp.data(), rows, ks, data, scales,
                                   hs && tier_info(tier).has_scales ? hs->r.data() : nullptr);
  if (!hs) return err;
  std::vector<float> recon(w.size());
  const TierTensor t{tier, data, tier_info(tier).has_scales ? scales : nullptr, rows, ks};
  for (int64_t r = 0; r < rows; ++r) dequantize_tier_row(t, r, &recon[static_cast<size_t>(r * ks)]);
  return hessian_error(w, recon, *hs);
}

// What the CPU's decode reads of an i8s tensor quantized into `data`: the
// high planes alone, with the error measured as quantize_measured does.
double i8s_high_plane_error(const std::vector<float>& w, const std::vector<float>& imp, int64_t rows, int64_t ks,
                            const std::optional<Hessian>& hs, const uint8_t* data, const float* scales) {
  std::vector<float> recon(w.size());
  const TierTensor t{Tier::kI8s, data, scales, rows, ks};
  for (int64_t r = 0; r < rows; ++r) dequantize_i8s_high_row(t, r, &recon[static_cast<size_t>(r * ks)]);
  if (hs) return hessian_error(w, recon, *hs);
  double err = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double d = static_cast<double>(w[i]) - recon[i];
    err += (imp.empty() ? 1.0f : imp[i % static_cast<size_t>(ks)]) * d * d;
  }
  return err;
}

double weighted_energy(const std::vector<float>& w, const std::vector<float>& imp, int64_t k) {
  double e = 0;
  for (size_t i = 0; i < w.size(); ++i) e += (imp.empty() ? 1.0f : imp[i % static_cast<size_t>(k)]) * static_cast<double>(w[i]) * w[i];
  return e;
}

// Rotation also spreads the activations' outliers, which the CPU engine
// quantizes to int8 per token: a rotated tensor is kept unless the unrotated
// one measures clearly better, not merely equal.
constexpr double kRotationPreference = 1.02;

struct Measured {
  PlanTensor plan;
  std::map<Tier, bool> rotated;  // per tier: whether the rotated variant measured better
  std::optional<Tier> router;    // a MoE router's tier (fixed whatever the rules say)
  std::optional<Tier> carried;   // carried as it is (quant/carry.h)
};

// The tier that carries t, if carrying applies: a K-quant of whole
// super-blocks that no rule or map fixes at another tier.
std::optional<Tier> carry_tier(const PackOptions& o, const GgufTensorInfo& t, std::optional<Tier> fixed) {
  if (!o.carry || fixed) return std::nullopt;
  return carrier_tier(t.type, static_cast<int64_t>(t.ne(0)));
}


// MoE routers keep their values exactly: the families route in f32, and a
// flipped top-k costs more than any saving. Checkpoints trained in bf16
// (Qwen3, Mixtral, OLMoE) hold bf16 values even where a GGUF widens them to
// F32, and those are stored in bf16 - the same values in half the bytes,
// which the float matmul widens back exactly. Any other router stays f32.
Tier router_tier(const GgufTensorInfo& t) {
  const std::vector<float> w = load_rows(t, tier_stored_k(static_cast<int64_t>(t.ne(0))), false, 0);
  const bool bf16_exact =
      std::all_of(w.begin(), w.end(), [](float v) { return bits_from_f32(bf16_to_f32(f32_to_bf16(v))) == bits_from_f32(v); });
  return bf16_exact ? Tier::kBf16 : Tier::kF32;
}

// The tier rules, the tier map and the router rule fix for a tensor, if
// any: such a tensor is measured at that tier alone (rotated or not).
Result<std::optional<Tier>> fixed_tier(const PackOptions& o, const GgufTensorInfo& t) {
  if (router_tensor(t.name)) return std::optional<Tier>(router_tier(t));
  std::vector<PlanTensor> one(1);
  one[0].name = t.name;
  for (uint32_t id = 0; id < kTierCount; ++id) one[0].options.push_back({*tier_from_id(id), 0, 0.0});
  ORK_RETURN_IF_ERROR(apply_fixed_tiers(one, o.rules, o.tier_map.tiers));
  return one[0].fixed;
}

// The tier a unit is carried at, if any: carry_tier's, or a carried tier
// a rule or map fixes (check_inputs has checked that it carries it).
std::optional<Tier> unit_carried_tier(const PackOptions& o, const GgufTensorInfo& t, std::optional<Tier> fixed) {
  if (fixed && carried_tier(*fixed)) return fixed;
  return carry_tier(o, t, fixed);
}

Result<Measured> measure(const PackOptions& o, const GgufTensorInfo& t, uint64_t seed, std::optional<Tier> fixed) {
  Measured m;
  m.plan.name = t.name;
  m.plan.params = t.elems;
  const int64_t rows = static_cast<int64_t>(t.rows());
  const int64_t ks = tier_stored_k(static_cast<int64_t>(t.ne(0)));
  std::vector<int64_t> sample;
  const int64_t n = std::min<int64_t>(rows, o.sample_rows);
  for (int64_t i = 0; i < n; ++i) sample.push_back(i * rows / n);
  const double scale_up = static_cast<double>(rows) / static_cast<double>(n);
  // A tensor the rules or the map fix is measured at that tier alone; any
  // other takes part in planning with the candidates alone.
  const std::vector<Tier> tiers = fixed ? std::vector<Tier>{*fixed} : o.candidates;
  for (bool rotated : {false, true}) {
    if (rotated && (!o.rotate || !may_rotate(t))) continue;
    const std::vector<float> w = load_rows(t, ks, rotated, seed, &sample);
    if (!rotated) ORK_RETURN_IF_ERROR(check_finite(o.input, t, w, ks, &sample));
    const std::vector<float> imp = importance_for(o, t, ks, rotated);
    const std::optional<Hessian> hs = hessian_for(o, t, ks, rotated);
    std::vector<uint8_t> data;
    std::vector<float> scales(static_cast<size_t>(n));
    for (Tier tier : tiers) {
      data.resize(tier_data_bytes(tier, n, ks));
      double err = quantize_measured(tier, w, imp, n, ks, hs, data.data(), scales.data()) * scale_up;
      if (tier == Tier::kI8s && o.i8s_decode_share && !fixed) {
        const double share = std::clamp(o.i8s_decode_share(t.name), 0.0, 1.0);
        if (share < 1.0) {
          err = share * err + (1.0 - share) * i8s_high_plane_error(w, imp, n, ks, hs, data.data(), scales.data()) * scale_up;
        }
      }
      // The sample's scales say whether the file will keep them in f16.
      const uint64_t scale_bytes = tier_info(tier).has_scales ? (f16_scales_exact(scales) ? 2ull : 4ull) * rows : 0;
      const uint64_t bytes = tier_data_bytes(tier, rows, ks) + scale_bytes;
      auto it = std::find_if(m.plan.options.begin(), m.plan.options.end(), [&](const TierOption& x) { return x.tier == tier; });
      if (it == m.plan.options.end()) {
        m.plan.options.push_back({tier, bytes, err});
        m.rotated[tier] = rotated;
      } else if (err < it->error * kRotationPreference) {
        it->error = err;
        m.rotated[tier] = rotated;
      }
    }
  }
  return m;
}

// PlanTensor::weight from measured sensitivity (PackOptions::sensitivity):
// a group's divergence over the summed probe errors of its planned units.
Status weigh_by_sensitivity(const PackOptions& o, std::vector<PlanTensor>& plan) {
  if (o.sensitivity.empty()) return Status::ok();
  auto probe_error = [&](const PlanTensor& p) -> const TierOption* {
    for (const TierOption& opt : p.options) {
      if (opt.tier == o.sensitivity_probe) return &opt;
    }
    return nullptr;
  };
  std::map<std::string, double> group_error;
  for (const PlanTensor& p : plan) {
    if (p.fixed) continue;
    const TierOption* opt = probe_error(p);
    if (opt == nullptr) {
      return error(StatusCode::kInvalidArgument, "sensitivity: tensor '{}' was not measured at the probe tier {}",
                   p.name, tier_name(o.sensitivity_probe));
    }
    group_error[matrix_group(p.name)] += opt->error;
  }
  for (PlanTensor& p : plan) {
    if (p.fixed) continue;
    const std::string group = matrix_group(p.name);
    const auto it = o.sensitivity.find(group);
    if (it == o.sensitivity.end()) {
      return error(StatusCode::kInvalidArgument, "sensitivity: no measurement for tensor '{}'", group);
    }
    // A divergence too small to measure still ranks the group lowest, not
    // at nothing (its errors would then be free); a group whose probe
    // error is zero (all-zero weights) has nothing to weigh.
    const double kld = std::max(it->second, 1e-12);
    const double err = group_error[group];
    p.weight = err > 0 ? kld / err : 1.0;
  }
  // Weights in divergence per unit of error; one scale for all keeps the
  // greedy's sums well away from underflow.
  double largest = 0;
  for (const PlanTensor& p : plan) largest = std::max(largest, p.fixed ? 0.0 : p.weight);
  for (PlanTensor& p : plan) {
    if (!p.fixed && largest > 0) p.weight /= largest;
  }
  return Status::ok();
}

// The units ork packs: every tensor as it is, except Mixture-of-Experts
// tensors (3-D, ne[2] = experts), which become one 2-D matrix per expert,
// "<name>.e<i>", so that every expert gets its own tier, rotation and error.
std::vector<GgufTensorInfo> packing_units(const GgufFile& in) {
  std::vector<GgufTensorInfo> units;
  for (const GgufTensorInfo& t : in.tensors()) {
    if (t.dims.size() != 3 || t.dims[2] < 2) {
      units.push_back(t);
      continue;
    }
    const uint64_t experts = t.dims[2];
    for (uint64_t e = 0; e < experts; ++e) {
      GgufTensorInfo u = t;
      u.name = t.name + ".e" + std::to_string(e);
      u.dims = {t.dims[0], t.dims[1]};
      u.elems = t.elems / experts;
      u.bytes = t.bytes / experts;
      u.data = t.data + e * u.bytes;
      units.push_back(std::move(u));
    }
  }
  return units;
}

// The share of decoded tokens that read a unit (PlanTensor::read_share):
// a routed expert's experts used / experts, the token embedding one of its
// rows (unless the output reuses it), any other tensor all of it.
double unit_read_share(const GgufFile& in, const GgufTensorInfo& unit) {
  if (matrix_group(unit.name) != unit.name) {
    const std::string arch = in.find_string("general.architecture").value_or("");
    const std::optional<int64_t> used = in.find_int(arch + ".expert_used_count");
    const std::optional<int64_t> count = in.find_int(arch + ".expert_count");
    if (used && count && *used > 0 && *count >= *used) return static_cast<double>(*used) / static_cast<double>(*count);
    return 1.0;
  }
  if (unit.name == "token_embd.weight" && in.find_tensor("output.weight") != nullptr && unit.rows() > 0) {
    return 1.0 / static_cast<double>(unit.rows());
  }
  return 1.0;
}

Result<std::vector<uint8_t>> build_metadata(const GgufFile& in, const PackOptions& o, const PackReport& report) {
  GgufWriter w;
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.alignment") continue;  // a GGUF data-section property, meaningless here
    w.set(key, value);
  }
  const size_t slash = o.input.find_last_of('/');
  w.set("ork.pack.source", GgufValue::make_string(slash == std::string::npos ? o.input : o.input.substr(slash + 1)));
  w.set("ork.pack.tiers", GgufValue::make_string(format_tier_map(report.tier_map)));
  w.set("ork.pack.bpw", GgufValue::make_float32(static_cast<float>(report.bpw())));
  // What each tensor was in the source (a MoE unit "x.e3" was "x"), for
  // `ork inspect`.
  std::vector<std::string> sources;
  for (const GgufTensorInfo& t : in.tensors()) sources.push_back(t.name + "=" + std::string(ggml_type_name(t.type)));
  w.set("ork.pack.source_types", GgufValue::make_string_array(std::move(sources)));
  for (const auto& [key, value] : o.extra_metadata) w.set(key, GgufValue::make_string(value));
  w.set("ork.rotation", GgufValue::make_string(o.rotate ? "hadamard" : "none"));
  w.set("ork.rotation.seed", GgufValue::make_uint64(o.rotation_seed));
  if (o.imatrix != nullptr) {
    w.set("ork.calibration.source", GgufValue::make_string(o.calibration_source));
    w.set("ork.calibration.tokens", GgufValue::make_uint64(o.imatrix->tokens()));
  }
  return w.write_memory();
}

// Runs work(i) for i in [0, n) on `threads` threads and hands the results
// to consume(i, result) in order, on the calling thread (which writes the
// file). Workers stay at most a few units ahead of the consumer, so memory
// stays at a few tensors in f32. The first error stops the work.
template <class T>
Status ordered_parallel(size_t n, int threads, const std::function<Result<T>(size_t)>& work,
                        const std::function<Status(size_t, T&)>& consume) {
  const size_t window = 2 * static_cast<size_t>(threads);
  std::vector<std::optional<Result<T>>> slots(n);
  std::mutex mu;
  std::condition_variable cv;
  size_t next = 0, consumed = 0;
  bool stop = false;
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || next >= n || next < consumed + window; });
        if (stop || next >= n) return;
        i = next++;
      }
      Result<T> r = work(i);
      std::lock_guard lock(mu);
      slots[i].emplace(std::move(r));
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  Status status = Status::ok();
  for (size_t i = 0; i < n && status.is_ok(); ++i) {
    std::optional<Result<T>> r;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return slots[i].has_value(); });
      r = std::move(slots[i]);
      slots[i].reset();
      consumed = i + 1;
      cv.notify_all();
    }
    status = r->is_ok() ? consume(i, r->value()) : r->status();
  }
  {
    std::lock_guard lock(mu);
    stop = true;
    cv.notify_all();
  }
  for (std::thread& t : pool) t.join();
  return status;
}

void warn(const PackOptions& o, const std::string& message) {
  if (o.warn) o.warn(message);
}

// The tier map, the rules and the importance matrix checked against the
// model before any work: a name that matches nothing is a mistake the
// user would otherwise find only in the result.
Status check_inputs(const PackOptions& o, const std::vector<GgufTensorInfo>& units) {
  std::map<std::string, const GgufTensorInfo*> by_name;
  for (const GgufTensorInfo& t : units) by_name[t.name] = &t;
  for (const auto& [name, tier] : o.tier_map.tiers) {
    const auto line = o.tier_map.lines.find(name);
    const std::string where =
        fmt::format("{}:{}", o.tier_map.source, line != o.tier_map.lines.end() ? line->second : 0);
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      return error(StatusCode::kInvalidArgument, "{}: tensor '{}' is not in {}", where, escape_text(name), o.input);
    }
    if (!is_matrix(*it->second)) {
      return error(StatusCode::kInvalidArgument, "{}: tensor '{}' is a vector, which stays f32; only matrices take a tier",
                   where, escape_text(name));
    }
    if (router_tensor(name)) {
      warn(o, fmt::format("{}: '{}' is a MoE router, which keeps its values exactly ({}); its line is ignored", where,
                          escape_text(name), tier_name(router_tier(*it->second))));
    }
  }
  for (const TierRule& rule : o.rules) {
    const std::regex re(rule.pattern);
    const bool any = std::any_of(units.begin(), units.end(),
                                 [&](const GgufTensorInfo& t) { return is_matrix(t) && std::regex_search(t.name, re); });
    if (!any) warn(o, fmt::format("tier rule '{}={}' matches no matrix of {}", rule.pattern, tier_name(rule.tier), o.input));
  }
  // A rule or map may name q4k / q6k (a tier map written by a pack that
  // carried does): only for the tensors they carry.
  if (!o.rules.empty() || !o.tier_map.empty()) {
    for (const GgufTensorInfo& t : units) {
      if (!is_matrix(t)) continue;
      ORK_ASSIGN_OR_RETURN(const std::optional<Tier> fixed, fixed_tier(o, t));
      if (fixed && carried_tier(*fixed) && carrier_tier(t.type, static_cast<int64_t>(t.ne(0))) != fixed) {
        return error(StatusCode::kInvalidArgument,
                     "{}: tensor '{}' is {}, but tier {} only carries {} tensors of whole {}-weight blocks", o.input,
                     escape_text(t.name), ggml_type_name(t.type), tier_name(*fixed),
                     ggml_type_name(carried_source(*fixed)), carried_block(*fixed));
      }
    }
  }
  if (o.imatrix == nullptr) return Status::ok();
  size_t matched = 0;
  std::string unknown;
  for (const auto& [name, v] : o.imatrix->entries()) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      if (unknown.empty()) unknown = name;
      continue;
    }
    const auto k = static_cast<size_t>(it->second->ne(0));
    if (!v.raw.empty() && v.raw.size() != k) {
      return error(StatusCode::kInvalidArgument,
                   "importance matrix {}: entry '{}' has {} columns, but the tensor in {} has {}: was it collected on "
                   "another model?",
                   o.calibration_source, escape_text(name), v.raw.size(), o.input, k);
    }
    ++matched;
  }
  if (matched == 0 && !o.imatrix->entries().empty()) {
    return error(StatusCode::kInvalidArgument,
                 "importance matrix {}: none of its {} entries names a tensor of {} (first: '{}'): it was collected on "
                 "another model",
                 o.calibration_source, o.imatrix->entries().size(), o.input, escape_text(unknown));
  }
  if (matched < o.imatrix->entries().size()) {
    warn(o, fmt::format("importance matrix {}: {} of its {} entries name no tensor of {} (first: '{}')",
                        o.calibration_source, o.imatrix->entries().size() - matched, o.imatrix->entries().size(),
                        o.input, escape_text(unknown)));
  }
  return Status::ok();
}

int pack_threads(const PackOptions& o) {
  if (o.threads > 0) return o.threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace

bool router_tensor(const std::string& name) { return name.find("ffn_gate_inp") != std::string::npos; }

// The least a decoded token can read of the model - every tensor at its
// fixed, carried or cheapest candidate tier, scales at two bytes a row -
// against --decode-bpw, before any measuring: the planner's own check
// (plan_tiers) comes after the calibration, and this bound is never above
// what it finds, so it refuses no budget the planner would take.
Status check_decode_budget(const PackOptions& o, const GgufFile& in, const std::vector<GgufTensorInfo>& units) {
  if (!o.decode_bpw) return Status::ok();
  double read_params = 0, least = 0;
  for (const GgufTensorInfo& t : units) {
    const auto rows = static_cast<int64_t>(t.rows());
    const int64_t ks = tier_stored_k(static_cast<int64_t>(t.ne(0)));
    if (!is_matrix(t)) {
      read_params += static_cast<double>(t.elems);
      least += static_cast<double>(tier_data_bytes(Tier::kF32, rows, ks));
      continue;
    }
    ORK_ASSIGN_OR_RETURN(const std::optional<Tier> fixed, fixed_tier(o, t));
    const std::optional<Tier> carried = unit_carried_tier(o, t, fixed);
    std::vector<Tier> tiers = carried ? std::vector<Tier>{*carried} : fixed ? std::vector<Tier>{*fixed} : o.candidates;
    uint64_t cheapest = UINT64_MAX;
    for (Tier tier : tiers) {
      const uint64_t b = carried ? tier_data_bytes(tier, rows, static_cast<int64_t>(t.ne(0)))
                                 : tier_data_bytes(tier, rows, ks) + (tier_info(tier).has_scales ? 2ull * rows : 0);
      cheapest = std::min(cheapest, b);
    }
    const double share = unit_read_share(in, t);
    read_params += share * static_cast<double>(t.elems);
    least += share * static_cast<double>(cheapest);
  }
  const double budget = *o.decode_bpw * read_params / 8.0;
  if (least > budget) {
    return error(StatusCode::kInvalidArgument,
                 "--decode-bpw {:g}: a decoded token reads at least {:.3f} bits per weight of {} (every tensor at its "
                 "cheapest tier); raise it or relax --tier rules",
                 *o.decode_bpw, 8.0 * least / read_params, o.input);
  }
  return Status::ok();
}

Status check_pack_inputs(const PackOptions& o) {
  ORK_ASSIGN_OR_RETURN(GgufFile in, GgufFile::open(o.input));
  const std::vector<GgufTensorInfo> units = packing_units(in);
  ORK_RETURN_IF_ERROR(check_inputs(o, units));
  return check_decode_budget(o, in, units);
}

Result<PackReport> pack_model(const PackOptions& o, const PackProgress& progress) {
  ORK_ASSIGN_OR_RETURN(GgufFile in, GgufFile::open(o.input));
  if (o.imatrix != nullptr && o.imatrix->rotation_seed() != o.rotation_seed) {
    return error(StatusCode::kInvalidArgument,
                 "the importance matrix was collected for rotation seed {}, the pack uses {}", o.imatrix->rotation_seed(),
                 o.rotation_seed);
  }
  const std::vector<GgufTensorInfo> units = packing_units(in);
  ORK_RETURN_IF_ERROR(check_inputs(o, units));
  for (const GgufTensorInfo& t : in.tensors()) {
    if (!can_dequantize(t.type)) {
      return error(StatusCode::kUnsupported, "{}: tensor '{}' has type {}, which ork cannot read yet", o.input, t.name,
                   ggml_type_name(t.type));
    }
  }

  const int threads = pack_threads(o);
  // Pass 1: measure, one unit per worker.
  std::vector<Measured> measured;
  uint64_t fixed_bytes = 0, params = 0, source_bytes = 0;
  double read_params = 0;  // per decoded token (unit_read_share)
  using MaybeMeasured = std::optional<Measured>;
  const Status measuring = ordered_parallel<MaybeMeasured>(
      units.size(), threads,
      [&](size_t i) -> Result<MaybeMeasured> {
        const GgufTensorInfo& t = units[i];
        if (!is_matrix(t)) return MaybeMeasured();
        ORK_ASSIGN_OR_RETURN(const std::optional<Tier> fixed, fixed_tier(o, t));
        const std::optional<Tier> carried = unit_carried_tier(o, t, fixed);
        if (carried) {
          Measured m;
          m.plan.name = t.name;
          m.plan.params = t.elems;
          const auto rows = static_cast<int64_t>(t.rows());
          m.plan.options.push_back({*carried, tier_data_bytes(*carried, rows, static_cast<int64_t>(t.ne(0))), 0.0});
          m.rotated[*carried] = false;
          m.carried = carried;
          return MaybeMeasured(std::move(m));
        }
        ORK_ASSIGN_OR_RETURN(Measured m, measure(o, t, o.rotation_seed, fixed));
        if (router_tensor(t.name)) m.router = fixed;
        return MaybeMeasured(std::move(m));
      },
      [&](size_t i, MaybeMeasured& m) -> Status {
        const GgufTensorInfo& t = units[i];
        params += t.elems;
        const double share = m ? unit_read_share(in, t) : 1.0;
        read_params += static_cast<double>(t.elems) * share;
        source_bytes += m && m->carried ? m->plan.options[0].bytes : t.bytes;
        if (progress) progress(0, i, units.size(), t.name);
        if (m) {
          m->plan.read_share = share;
          measured.push_back(std::move(*m));
        } else {
          fixed_bytes += tier_data_bytes(Tier::kF32, static_cast<int64_t>(t.rows()), tier_stored_k(static_cast<int64_t>(t.ne(0))));
        }
        return Status::ok();
      });
  ORK_RETURN_IF_ERROR(measuring);
  std::vector<PlanTensor> plan_input;
  for (Measured& m : measured) {
    // Rules and maps may name any measured tier; the free plan uses the
    // candidates. MoE routers keep their tier whatever the rules say (router_tier).
    std::vector<PlanTensor> one = {m.plan};
    if (m.router || m.carried) {
      one[0].fixed = m.router ? *m.router : *m.carried;
    } else {
      ORK_RETURN_IF_ERROR(apply_fixed_tiers(one, o.rules, o.tier_map.tiers));
    }
    PlanTensor p = one[0];
    if (!p.fixed) {
      std::vector<TierOption> keep;
      for (const TierOption& opt : p.options) {
        if (std::find(o.candidates.begin(), o.candidates.end(), opt.tier) != o.candidates.end()) keep.push_back(opt);
      }
      p.options = keep;
    }
    plan_input.push_back(p);
  }
  ORK_RETURN_IF_ERROR(weigh_by_sensitivity(o, plan_input));
  // The smallest plan: every tensor at its fixed tier or its cheapest candidate.
  uint64_t smallest = 0;
  for (const PlanTensor& p : plan_input) {
    uint64_t cheapest = UINT64_MAX;
    for (const TierOption& opt : p.options) {
      if (!p.fixed || opt.tier == *p.fixed) cheapest = std::min(cheapest, opt.bytes);
    }
    smallest += cheapest;
  }
  // With no budget, the smallest plan is the plan (rules and maps decide).
  uint64_t budget = smallest;
  if (o.budget || o.bpw || o.source_budget) {
    const uint64_t total = o.bpw      ? static_cast<uint64_t>(*o.bpw * static_cast<double>(params) / 8.0)
                           : o.budget ? *o.budget
                                      : source_bytes;
    budget = total > fixed_bytes ? total - fixed_bytes : 0;
  }
  PackReport report;
  if (budget < smallest && o.budget_is_default) {
    report.warning = fmt::format("the default {:.2f} bpw cannot be met: the smallest plan is {:.3f} bpw; packing that",
                                 o.bpw.value_or(0.0), 8.0 * static_cast<double>(smallest + fixed_bytes) / static_cast<double>(params));
    budget = smallest;
  }
  // The decode budget: bytes a token reads of the planned tensors, after
  // the vectors (read by every token).
  std::optional<double> read_budget;
  if (o.decode_bpw) {
    read_budget = std::max(0.0, *o.decode_bpw * read_params / 8.0 - static_cast<double>(fixed_bytes));
  }
  using Tiers = std::map<std::string, Tier>;
  ORK_ASSIGN_OR_RETURN(Tiers tiers, plan_tiers(plan_input, budget, read_budget));

  report.params = params;
  report.tier_map = tiers;
  // Bytes are known before writing: report them in the metadata.
  uint64_t bytes = fixed_bytes;
  for (const Measured& m : measured) {
    for (const TierOption& opt : m.plan.options) {
      if (opt.tier == tiers.at(m.plan.name)) bytes += opt.bytes;
    }
  }
  report.bytes = bytes;
  report.read_params = read_params;
  report.read_bytes = static_cast<double>(fixed_bytes) + plan_read_bytes(plan_input, tiers);

  // Pass 2: quantize and write.
  ORK_ASSIGN_OR_RETURN(std::vector<uint8_t> metadata, build_metadata(in, o, report));
  // Which measured unit each matrix unit is (vectors have none).
  std::vector<size_t> measured_index(units.size(), SIZE_MAX);
  for (size_t i = 0, mi = 0; i < units.size(); ++i) {
    if (is_matrix(units[i])) measured_index[i] = mi++;
  }
  // Every tensor's spec is fixed by the plan before any is quantized.
  std::vector<OrkpackTensorSpec> specs(units.size());
  std::vector<bool> rotated(units.size(), false);
  for (size_t i = 0; i < units.size(); ++i) {
    const GgufTensorInfo& t = units[i];
    OrkpackTensorSpec& spec = specs[i];
    spec.name = t.name;
    spec.dims = t.dims;
    spec.k_stored = tier_stored_k(static_cast<int64_t>(t.ne(0)));
    if (is_matrix(t)) {
      spec.tier = tiers.at(t.name);
      rotated[i] = measured[measured_index[i]].rotated.at(spec.tier);
    } else {
      spec.tier = Tier::kF32;
    }
    spec.rotation_block = rotated[i] ? static_cast<uint32_t>(rotation_block(spec.k_stored)) : 0;
  }
  // Tensor i into `data` (tier_data_bytes, zeroed) and `scales` (rows
  // floats, or null where the tier has none); returns its spec's error.
  auto produce = [&](size_t i, uint8_t* data, float* scales) -> Result<float> {
    const GgufTensorInfo& t = units[i];
    const OrkpackTensorSpec& spec = specs[i];
    const int64_t ks = spec.k_stored;
    const int64_t rows = static_cast<int64_t>(t.rows());
    if (is_matrix(t) && measured[measured_index[i]].carried) {
      ORK_RETURN_IF_ERROR(carry_rows(t.type, t.data, rows, ks, data, nullptr));
      return 0.0f;  // the source's own weights
    }
    const std::vector<float> w = load_rows(t, ks, rotated[i], o.rotation_seed);
    ORK_RETURN_IF_ERROR(check_finite(o.input, t, w, ks));
    const std::vector<float> imp = is_matrix(t) ? importance_for(o, t, ks, rotated[i]) : std::vector<float>{};
    const std::optional<Hessian> hs = is_matrix(t) ? hessian_for(o, t, ks, rotated[i]) : std::nullopt;
    std::vector<float> scratch(scales == nullptr ? static_cast<size_t>(rows) : 0);
    const double err = quantize_measured(spec.tier, w, imp, rows, ks, hs, data, scales == nullptr ? scratch.data() : scales);
    double energy = weighted_energy(w, imp, ks);
    if (hs) energy = hessian_error(w, std::vector<float>(w.size(), 0.0f), *hs);
    return energy > 0 ? static_cast<float>(err / energy) : 0.0f;
  };
  auto record = [&](size_t i, uint64_t tensor_bytes, float err) {
    const GgufTensorInfo& t = units[i];
    if (progress) progress(1, i, units.size(), t.name);
    report.tensors.push_back({t.name, specs[i].tier, t.type, rotated[i], t.elems, tensor_bytes, err});
  };
  auto scale_count = [&](size_t i) {
    return tier_info(specs[i].tier).has_scales ? static_cast<size_t>(specs[i].rows()) : 0;
  };

  if (o.in_memory != nullptr) {
    // Straight into the image: no copy, no file.
    ORK_ASSIGN_OR_RETURN(OrkpackImage image, OrkpackImage::create(o.output, metadata, specs));
    const Status making = ordered_parallel<float>(
        units.size(), threads,
        [&](size_t i) -> Result<float> { return produce(i, image.data(i), image.scales(i)); },
        [&](size_t i, float& err) -> Status {
          image.set_error(i, err);
          const float* scales = image.scales(i);
          record(i, tier_data_bytes(specs[i].tier, specs[i].rows(), specs[i].k_stored) +
                        (scales != nullptr ? orkpack_scale_bytes({scales, scale_count(i)}) : 0),
                 err);
          return Status::ok();
        });
    ORK_RETURN_IF_ERROR(making);
    *o.in_memory = std::move(image).finish();
    return report;
  }

  ORK_ASSIGN_OR_RETURN(OrkpackWriter writer, OrkpackWriter::create(o.output, metadata));
  struct Packed {
    std::vector<uint8_t> data;
    std::vector<float> scales;
    float error = 0.0f;
  };
  const Status writing = ordered_parallel<Packed>(
      units.size(), threads,
      [&](size_t i) -> Result<Packed> {
        Packed p;
        p.data.resize(tier_data_bytes(specs[i].tier, specs[i].rows(), specs[i].k_stored));
        p.scales.resize(scale_count(i));
        ORK_ASSIGN_OR_RETURN(p.error, produce(i, p.data.data(), p.scales.empty() ? nullptr : p.scales.data()));
        return p;
      },
      [&](size_t i, Packed& p) -> Status {
        OrkpackTensorSpec spec = specs[i];
        spec.error = p.error;
        ORK_RETURN_IF_ERROR(writer.add_tensor(spec, p.data, p.scales));
        record(i, p.data.size() + orkpack_scale_bytes(p.scales), p.error);
        return Status::ok();
      });
  ORK_RETURN_IF_ERROR(writing);
  ORK_RETURN_IF_ERROR(writer.finish());
  return report;
}

}  // namespace ork
