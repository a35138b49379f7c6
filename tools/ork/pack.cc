// ork pack: convert a GGUF into an orkpack under a bit budget.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "core/escape.h"
#include "core/output_file.h"

#include "commands.h"
#include "npu_plan.h"
#include "model/model.h"
#include "model/tokenizer/tokenizer.h"
#include "model/imatrix_collect.h"
#include "model/self_calibration.h"
#include "model/sensitivity.h"
#include "builtin_calibration.h"
#include "quant/carry.h"
#include "quant/imatrix.h"
#include "quant/packer.h"
#include "text_input.h"

namespace ork::cli {
namespace {

// Windows of the built-in text calibrated on by default: 8,192 tokens.
// docs/QUALITY.md section 9: sotu-moe packs to KLD 0.0050 / 0.0046 /
// 0.0044 / 0.0043 on 16 / 32 / 64 / 128 windows, tinystories656K to 0.0758
// / - / 0.0752 / 0.0726; the collection's time is linear in windows.
constexpr int kBuiltinWindows = 64;

struct PackCliOptions {
  std::string input, output;
  double bpw = 0;
  double decode_bpw = 0;
  uint64_t budget = 0;
  std::string imatrix, calib, tiers_file, write_tiers;
  std::vector<std::string> rules;
  std::string uniform;
  bool no_rotate = false;
  bool no_gptq = false;
  bool no_calibrate = false;
  bool calib_self = false;
  int calib_ctx = 128;
  int calib_chunks = 0;  // 0: 64 windows of a --calib text, kBuiltinWindows of the built-in one, 16 self-written
  int threads = 0;
  std::string npu;
  bool sensitivity = false;
  int sensitivity_chunks = 16;
};

// Everything that can be checked before the first tensor is measured:
// where the outputs go, and that the input is a model ork can run.
Status check_before_work(const PackCliOptions& c, const std::string& map_path) {
  ORK_RETURN_IF_ERROR(check_output_path(c.output, {c.input, c.imatrix, c.calib, c.tiers_file}, "-o"));
  ORK_RETURN_IF_ERROR(check_output_path(map_path, {c.input, c.imatrix, c.calib, c.tiers_file, c.output},
                                        c.write_tiers.empty() ? "the tier map" : "--write-tiers"));
  if (map_path == c.output) return error(StatusCode::kInvalidArgument, "--write-tiers is the same file as -o");
  // The packer reads tensors by name; the model's own load checks that they
  // are the ones its metadata describes (shapes, block count).
  return Model::load(c.input).status();
}

bool quantized_input(const std::string& path) {
  auto source = GgufFile::open(path);
  return source.is_ok() && quantized_source(*source);
}

// The text calibration runs on, as tokens: a file (--calib), the built-in
// text (the default) or the model's own writing (--calib-self).
struct CalibrationText {
  std::vector<int32_t> ids;
  int bos = -1;
  std::string source;  // recorded in the pack's metadata
};

Result<CalibrationText> calibration_text(const PackCliOptions& c, const Model& model, int n_ctx,
                                        const char* purpose = "collecting an importance matrix from") {
  CalibrationText t;
  if (c.calib_self) {
    const int windows = c.calib_chunks > 0 ? c.calib_chunks : 16;
    std::fprintf(stderr, "ork: calibrating on %d x %d tokens the model writes itself\n", windows, n_ctx);
    ORK_ASSIGN_OR_RETURN(SelfCalibration own,
                         generate_calibration(model, windows, n_ctx, /*seed=*/1,
                                              [](int done, int total) { progress_bar("generate", done, total); }));
    t.ids = std::move(own.tokens);
    t.bos = own.start;
    t.source = fmt::format("self-generated ({} x {} tokens)", windows, n_ctx);
    return t;
  }
  const bool builtin = c.calib.empty();
  const int windows = c.calib_chunks > 0 ? c.calib_chunks : builtin ? kBuiltinWindows : 64;
  const size_t n = static_cast<size_t>(n_ctx) * static_cast<size_t>(windows);
  ORK_ASSIGN_OR_RETURN(TokenStream tokens, builtin ? tokenize_text(model, std::string(builtin_calibration_text()), n)
                                                   : tokenize_file(model, c.calib, n));
  t.source = builtin ? kBuiltinCalibrationName : c.calib;
  std::fprintf(stderr, "ork: %s %zu tokens of %s%s\n", purpose, tokens.ids.size(), t.source.c_str(),
               builtin ? " (--calib FILE: your text; --no-calibrate: none)" : "");
  t.ids = std::move(tokens.ids);
  t.bos = tokens.bos;
  return t;
}

// The importance matrix the plan and GPTQ use: --imatrix's, else one
// collected on calibration text - for a float source even when none is
// named (the built-in text), unless --no-calibrate. A quantized source's
// blocks are carried, so it is calibrated only when asked.
Result<std::optional<ImportanceMatrix>> importance(const PackCliOptions& c, bool quantized, PackOptions& o) {
  if (!c.imatrix.empty()) {
    ORK_ASSIGN_OR_RETURN(ImportanceMatrix m, ImportanceMatrix::load(c.imatrix));
    o.calibration_source = c.imatrix;
    return std::optional<ImportanceMatrix>(std::move(m));
  }
  const bool asked = !c.calib.empty() || c.calib_self;
  if (!asked && (c.no_calibrate || quantized)) return std::optional<ImportanceMatrix>();
  ORK_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::load(c.input));
  const int n_ctx = std::min(c.calib_ctx, model->config().n_ctx_train);
  auto text = calibration_text(c, *model, n_ctx);
  auto m = text.is_ok() ? collect_importance(*model, text->ids, n_ctx, o.rotation_seed, text->bos,
                                             [](int done, int total) { progress_bar("imatrix", done, total); })
                        : Result<ImportanceMatrix>(text.status());
  if (!m.is_ok()) {
    if (!asked && m.status().code() == StatusCode::kNumerical) {
      // Weights that make the logits NaN: the packer names the tensor that
      // holds them, which says more than the logits can.
      std::fprintf(stderr, "ork: warning: calibration stopped (%s); packing uncalibrated\n",
                   m.status().to_string().c_str());
      return std::optional<ImportanceMatrix>();
    }
    return error(m.status().code(), "calibration: {} (--no-calibrate packs without it)", m.status().message());
  }
  o.calibration_source = text->source;
  return std::optional<ImportanceMatrix>(std::move(m).value());
}

// The model with every matrix at one tier, as this pack quantizes (same
// importance matrix, rotation and GPTQ), packed in memory.
Result<std::unique_ptr<Model>> pack_uniform_in_memory(const PackCliOptions& c, const PackOptions& o, Tier tier) {
  PackOptions p = o;
  p.rules = {TierRule{".", tier}};
  p.tier_map = TierMap();
  p.bpw.reset();
  p.budget.reset();
  p.source_budget = false;
  p.budget_is_default = false;
  p.sensitivity.clear();
  p.output = fmt::format("{} (all {}, for sensitivity)", c.output, tier_name(tier));
  MappedFile image;
  p.in_memory = &image;
  const std::string label = fmt::format("all {}", tier_name(tier));
  ORK_RETURN_IF_ERROR(pack_model(p, [&](int phase, size_t done, size_t total, const std::string&) {
                        progress_bar((label + (phase == 0 ? ": measure" : ": quantize")).c_str(),
                                     static_cast<int>(done + 1), static_cast<int>(total));
                      }).status());
  ORK_ASSIGN_OR_RETURN(OrkpackFile file, OrkpackFile::parse(std::move(image)));
  return Model::load(std::move(file));
}

// --sensitivity: how far the logits move with each tensor alone quantized
// at the probe tier (model/sensitivity.h), on the calibration text (a
// --calib file, else the built-in text; with --calib-self, text the model
// writes). Both sides run on the fast kernels: the model measured is this
// pack's quantization at i8 (KLD 0.0006 from F32 on tinystories656K,
// against 0.001-0.04 for one tensor at nf4), whose tensors take their
// probe-tier quantization one group at a time. (On the float model itself
// a llama-1b window of 128 tokens took minutes: hours for its 114 tensors.)
Result<std::map<std::string, double>> sensitivity_of_each_group(const PackCliOptions& c, const PackOptions& o) {
  std::fprintf(stderr, "ork: measuring sensitivity: the model at i8 and at %s, then each matrix alone at %s\n",
               std::string(tier_name(o.sensitivity_probe)).c_str(), std::string(tier_name(o.sensitivity_probe)).c_str());
  ORK_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, pack_uniform_in_memory(c, o, Tier::kI8));
  ORK_ASSIGN_OR_RETURN(std::unique_ptr<Model> probe, pack_uniform_in_memory(c, o, o.sensitivity_probe));
  SensitivityOptions so;
  so.n_ctx = std::min(c.calib_ctx, model->config().n_ctx_train);
  so.chunks = c.sensitivity_chunks;
  so.skip = router_tensor;  // routers keep their tier
  PackCliOptions text_options = c;
  text_options.calib_chunks = c.sensitivity_chunks;
  ORK_ASSIGN_OR_RETURN(CalibrationText text, calibration_text(text_options, *model, so.n_ctx, "measuring sensitivity on"));
  return ork::measure_sensitivity(*model, *probe, text.ids, text.bos, so,
                             [](int done, int total) { progress_bar("sensitivity", done - 1, total); });
}

int pack(const PackCliOptions& c) {
  const std::string map_path = c.write_tiers.empty() ? c.output + ".tiers" : c.write_tiers;
  if (Status st = check_before_work(c, map_path); !st.is_ok()) return fail(st.to_string());
  PackOptions o;
  o.warn = [](const std::string& message) { std::fprintf(stderr, "ork: warning: %s\n", escape_text(message).c_str()); };
  o.input = c.input;
  o.output = c.output;
  o.rotate = !c.no_rotate;
  o.gptq = !c.no_gptq;
  o.threads = c.threads;
  if (c.budget > 0) o.budget = c.budget;
  if (c.bpw > 0) o.bpw = c.bpw;
  if (c.decode_bpw > 0) o.decode_bpw = c.decode_bpw;
  if (!c.uniform.empty()) {
    auto rule = parse_tier_rule(".=" + c.uniform);
    if (!rule.is_ok()) return fail(rule.status().message());
    o.rules.push_back(*rule);
  }
  for (const std::string& text : c.rules) {
    auto rule = parse_tier_rule(text);
    if (!rule.is_ok()) return fail(rule.status().message());
    o.rules.push_back(*rule);
  }
  if (!c.tiers_file.empty()) {
    auto map = read_tier_map(c.tiers_file);
    if (!map.is_ok()) return fail(map.status().message());
    o.tier_map = std::move(map).value();
  }
  const bool quantized = quantized_input(c.input);
  if (!o.bpw && !o.budget && o.rules.empty() && o.tier_map.empty()) {
    // A quantized source keeps its size: its K-quants are carried and the
    // rest share what their own bytes were. A float one gets 4.5 bpw.
    if (quantized) {
      o.source_budget = true;
    } else {
      o.bpw = 4.5;
    }
    o.budget_is_default = true;
  }

  if (!c.npu.empty()) {
    if (quantized) {
      return fail("--npu plans a float source's tiers for the device; " + c.input +
                  " is quantized (its blocks are carried, and the NPU reads none of them)");
    }
    if (Status st = plan_for_npu(c.npu, o); !st.is_ok()) return fail("--npu: " + st.message());
  }
  if (c.sensitivity) {
    if (quantized) return fail("--sensitivity weighs a plan of a float source's tiers; " + c.input + " is quantized (its blocks are carried)");
    if (!c.uniform.empty()) return fail("--sensitivity weighs a plan; --uniform leaves nothing to plan");
  }
  {
    // The rules and the tier map against the model before the importance
    // matrix is collected (its warnings are told once, by the pack).
    PackOptions first = o;
    first.warn = nullptr;
    if (const Status s = check_pack_inputs(first); !s.is_ok()) return fail(s.to_string());
  }
  auto imatrix = importance(c, quantized, o);
  if (!imatrix.is_ok()) return fail(imatrix.status().to_string());
  if (*imatrix) o.imatrix = &**imatrix;
  if (c.sensitivity) {
    auto measured = sensitivity_of_each_group(c, o);
    if (!measured.is_ok()) return fail(measured.status().to_string());
    o.sensitivity = std::move(measured).value();
  }

  const auto t0 = std::chrono::steady_clock::now();
  auto report = pack_model(o, [](int phase, size_t done, size_t total, const std::string&) {
    progress_bar(phase == 0 ? "measure" : "write", static_cast<int>(done + 1), static_cast<int>(total));
  });
  if (!report.is_ok()) return fail(report.status().to_string());
  if (!report->warning.empty()) std::fprintf(stderr, "ork: warning: %s\n", report->warning.c_str());
  const Status wrote_map = write_file_atomically(
      map_path, "# tier map of " + c.output + " (ork pack); edit and pass back with --tiers\n" +
                    format_tier_map(report->tier_map));
  if (!wrote_map.is_ok()) return fail(wrote_map.to_string());
  std::map<std::string, std::pair<int, uint64_t>> histogram;
  int rotated = 0;
  for (const auto& t : report->tensors) {
    auto& h = histogram[std::string(tier_name(t.tier))];
    h.first++;
    h.second += t.bytes;
    rotated += t.rotated;
  }
  std::fprintf(stderr, "ork: wrote %s in %.1fs: %.2f MiB, %llu parameters, %.3f bits per weight; %d tensors rotated\n",
               c.output.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               static_cast<double>(report->bytes) / (1 << 20), static_cast<unsigned long long>(report->params),
               report->bpw(), rotated);
  if (report->read_params < static_cast<double>(report->params) * 0.999) {
    // A token reads less than the file: a MoE's routed experts, the
    // embedding's one row.
    std::fprintf(stderr, "ork: a decoded token reads %.2f MiB of it on average: %.3f bits per weight it reads%s\n",
                 report->read_bytes / (1 << 20), report->decode_bpw(),
                 o.decode_bpw ? fmt::format(" (--decode-bpw {:g})", *o.decode_bpw).c_str() : "");
  }
  for (const auto& [tier, h] : histogram) {
    std::fprintf(stderr, "  %-4s %4d tensors %10.2f MiB\n", tier.c_str(), h.first, static_cast<double>(h.second) / (1 << 20));
  }
  std::fprintf(stderr, "ork: tier map written to %s\n", map_path.c_str());
  if (!c.npu.empty() && o.bpw && report->bpw() < *o.bpw - 0.05) {
    std::fprintf(stderr, "ork: note: %.3f of %.3f bits per weight used: no tier the NPU reads at decode's int4 cost buys "
                 "more quality here (i8s only where the overlay is predicted to land in time)\n", report->bpw(), *o.bpw);
  }
  return 0;
}

}  // namespace

Runner add_pack(CLI::App& app) {
  auto c = std::make_shared<PackCliOptions>();
  app.add_option("input", c->input, "GGUF model to pack (F32/F16/BF16, or quantized as llama.cpp writes them)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("-o,--output", c->output, "orkpack to write")->required();
  app.add_option("--bpw", c->bpw,
                 "Budget: bits per weight over all parameters (default: 4.5 for an F32/F16/BF16 source; a quantized "
                 "one keeps its own size, its Q4_K...IQ4_XS tensors carried unchanged)")
      ->check(number_in(0, 32, true));
  app.add_option("--budget", c->budget, "Budget: total tensor bytes")->check(number_in(1, 1e18));
  app.add_option("--decode-bpw", c->decode_bpw,
                 "A second budget, on decode: bits per weight a decoded token reads (a MoE's routed experts count at "
                 "experts used / experts, the token embedding at one row). The plan then buys accuracy where a token "
                 "reads it least often, within both budgets (default: none; docs/QUALITY.md section 13)")
      ->check(number_in(0, 32, true));
  auto* imatrix = app.add_option("--imatrix", c->imatrix, "Importance matrix from `ork imatrix`")->check(CLI::ExistingFile);
  auto* calib = app.add_option("--calib", c->calib, "Calibration text: collect an importance matrix first")
                    ->check(CLI::ExistingFile)
                    ->excludes(imatrix);
  app.add_option("--calib-ctx", c->calib_ctx, "Calibration window in tokens")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--calib-chunks", c->calib_chunks,
                 "Calibration windows (default: 64 of a --calib text or of the built-in one, 16 with --calib-self)")
      ->check(CLI::Range(1, 1 << 30));
  auto* self = app.add_flag("--calib-self", c->calib_self,
                            "Calibrate on text the model writes itself (sampled at temperature 1.3): for a model "
                            "whose language the built-in English text does not fit")
                   ->excludes(calib)
                   ->excludes(imatrix);
  auto* no_calibrate = app.add_flag("--no-calibrate", c->no_calibrate,
               "Pack uncalibrated. Default without --imatrix/--calib: an importance matrix is collected on the "
               "built-in calibration text (public-domain English prose, data/calibration/) for an F32/F16/BF16 "
               "source; a quantized source's blocks are carried and it is not calibrated")
      ->excludes(calib)
      ->excludes(imatrix)
      ->excludes(self);
  app.add_option("--tier", c->rules, "Rule 'regex=tier' fixing matching tensors (repeatable; later rules win)");
  app.add_option("--tiers", c->tiers_file, "Tier map file ('tensor = tier' lines), wins over rules")->check(CLI::ExistingFile);
  app.add_option("--uniform", c->uniform, "Every matrix at one tier: " + tier_names());
  app.add_option("--write-tiers", c->write_tiers, "Where to write the tier map (default: <output>.tiers)");
  app.add_flag("--no-rotate", c->no_rotate, "Never rotate (default: rotate each tensor where it measures better)");
  app.add_flag("--no-gptq", c->no_gptq,
               "Round to nearest only (default: error-correcting rounding where the imatrix has input covariances)");
  app.add_option("--npu", c->npu,
                 "Plan for a device with this NPU (rk3588, hexagon-v75, hexagon-v79) from a float GGUF: only tiers "
                 "the NPU reads - i4, nf4 (through its int8 table) and i8s, the sensitive set the decode overlay "
                 "recomputes at int8 while the CPU reads its high plane (no i8: decode would read all its bytes; no "
                 "i5/i6: CPU only). i8s is priced by what "
                 "decode reads of it: its int8 error where the overlay is predicted to land in time on this device "
                 "(printed by role), its high plane's elsewhere - so a model too small for any job to land gets "
                 "none. With --sensitivity the choice weighs each tensor by its measured effect on the logits "
                 "(docs/QUALITY.md section 12)");
  app.add_flag("--sensitivity", c->sensitivity,
               "Weigh each tensor's quantization error by how far it moves the logits: each matrix (a MoE tensor's "
               "experts together) alone at nf4 in the model at i8, its KL divergence measured on the calibration "
               "text. Costs two more quantizations of the model (i8, nf4) and a short evaluation per tensor; "
               "plans more accurate packs at the same size (docs/QUALITY.md section 12)")
      ->excludes(no_calibrate);
  app.add_option("--sensitivity-chunks", c->sensitivity_chunks, "Windows of the calibration text per tensor measured")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("-t,--threads", c->threads, "Tensors quantized side by side (default: all cores)")
      ->check(thread_count());
  return [c] { return pack(*c); };
}

}  // namespace ork::cli
