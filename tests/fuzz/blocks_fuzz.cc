// Fuzz target for the per-type block dequantizers and the carried tiers:
// any bytes as the blocks of any GGUF type ork reads. Input: a type id, a
// row count (1-3), then the rows' blocks. Every type must dequantize
// without a fault; a type ork carries (quant/carry.h) must carry, read back
// bit for bit what its dequantizer gave, and - where every block scale is
// finite, as the orkpack reader insists - every SIMD target's matmul over
// the carried rows must agree with the reference kernel to rounding, at
// decode (one token) and in a batch of three.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "format/gguf/dequant.h"
#include "format/gguf/ggml_type.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/targets.h"
#include "kernels/ref/quant_matmul.h"
#include "quant/carry.h"
#include "quant/tier.h"

namespace {

using namespace ork;

[[noreturn]] void fail(const char* what, GgmlType type, int64_t at, double got, double want, double tolerance = 0) {
  std::fprintf(stderr, "%s: %s at %lld: %.9g, reference %.9g (tolerance %.3g)\n", what,
               std::string(ggml_type_name(type)).c_str(), static_cast<long long>(at), got, want, tolerance);
  std::abort();
}

bool same_float(float a, float b) { return std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b)); }

// Activations from the input's own bytes (deterministic), with a few
// outliers so that the per-block activation scales differ.
std::vector<float> activations(const uint8_t* data, size_t size, int n, int64_t k) {
  std::vector<float> x(static_cast<size_t>(n * k));
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < x.size(); ++i) {
    h = (h ^ data[i % size]) * 16777619u;
    x[i] = (static_cast<float>(h % 2001) - 1000.0f) / 250.0f * (i % 61 == 0 ? 20.0f : 1.0f);
  }
  return x;
}

// The carried rows of `tt` (as `w` reads them), copied into `bytes` with
// every code bit zero and the block headers kept: each weight becomes its
// block's offset or min.
QuantWeights zero_codes(const TierTensor& tt, const QuantWeights& w, std::vector<uint8_t>& bytes) {
  const size_t size = static_cast<size_t>(tier_data_bytes(tt.tier, tt.rows, tt.k_stored));
  bytes.assign(tt.data, tt.data + size);
  const int64_t b0 = plane0_row_bytes(w.kind, w.k), b1 = plane1_row_bytes(w.kind, w.k);
  const int64_t codes1 = block_kind(w.kind) ? block_headers_offset(w.kind, w.k) : b1;
  uint8_t* p0 = bytes.data() + (w.p0 - tt.data);
  uint8_t* p1 = w.p1 != nullptr ? bytes.data() + (w.p1 - tt.data) : nullptr;
  for (int64_t r = 0; r < tt.rows; ++r) {
    std::memset(p0 + r * b0, 0, static_cast<size_t>(b0));
    if (p1 != nullptr) std::memset(p1 + r * b1, 0, static_cast<size_t>(codes1));
  }
  QuantWeights z = w;
  z.p0 = p0;
  z.p1 = p1;
  return z;
}

void check_kernels(const TierTensor& tt, GgmlType type, const uint8_t* data, size_t size) {
  const QuantWeights w = quant_weights(tt);
  const int64_t k = tt.k_stored;
  const int64_t rows = tt.rows;
  // What rounding can move, per weight: |w0| + |w - w0|, w0 the weight its
  // block gives a code of all zero bits (the offset, or the block's min).
  // The kernels and the reference sum the codes' products and the offsets'
  // (or mins') separately, and the two can cancel far below either (a Q2_K
  // block of the largest scales and mins: the sums 1.1e-5 of sum |w * a|
  // apart, each right to rounding).
  std::vector<uint8_t> zeroed;
  const QuantWeights w0 = zero_codes(tt, w, zeroed);
  std::vector<double> terms(static_cast<size_t>(rows * k));
  std::vector<float> row(static_cast<size_t>(k)), row0(row.size());
  for (int64_t r = 0; r < rows; ++r) {
    ref::dequantize_codes_row(w, r, row.data());
    ref::dequantize_codes_row(w0, r, row0.data());
    for (int64_t j = 0; j < k; ++j) {
      const auto at = static_cast<size_t>(j);
      terms[static_cast<size_t>(r * k + j)] = std::fabs(static_cast<double>(row[at]) - row0[at]) + std::fabs(row0[at]);
    }
  }
  for (int n : {1, 3}) {
    const std::vector<float> x = activations(data, size, n, k);
    std::vector<int8_t> q(x.size());
    std::vector<float> scale(static_cast<size_t>(n));
    std::vector<int32_t> sum(static_cast<size_t>(n));
    ref::quantize_acts(x.data(), n, k, q.data(), scale.data(), sum.data(), 127);
    QuantActs a;
    a.q = q.data();
    a.scale = scale.data();
    a.sum = sum.data();
    a.k = k;
    a.n = n;
    a.f32 = x.data();
    std::vector<float> want(static_cast<size_t>(n * rows));
    ref::quant_matmul(w, a, want.data(), rows, 0, rows);
    // Their sum over a row, each times its activation's magnitude.
    std::vector<int8_t> bq;
    std::vector<float> bs;
    const int64_t block = act_block(w.kind);
    ref::block_acts(a, block, bq, bs);
    std::vector<float> mag(want.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int t = 0; t < n; ++t) {
        double m = 0;
        for (int64_t j = 0; j < k; ++j) {
          m += terms[static_cast<size_t>(r * k + j)] *
               std::fabs(bq[static_cast<size_t>(t * k + j)] * bs[static_cast<size_t>(t * (k / block) + j / block)]);
        }
        mag[static_cast<size_t>(t * rows + r)] = static_cast<float>(m);
      }
    }
    for (int target = 0; target < cpu::compiled_target_count(); ++target) {
      cpu::force_target(target);
      std::vector<float> got(want.size(), -7.0f);
      cpu::quant_matmul(w, a, got.data(), rows, 0, rows);
      for (size_t i = 0; i < want.size(); ++i) {
        const double tolerance = 1e-5 * mag[i] + 1e-30;
        if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= tolerance)) {
          fail(cpu::target_name(target), type, static_cast<int64_t>(i), got[i], want[i], tolerance);
        }
      }
    }
    cpu::force_target(-1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::optional<GgmlTypeInfo> info = ggml_type_info(data[0]);
  if (!info || !can_dequantize(info->type) || info->block_bytes == 0) return 0;
  const int64_t rows = 1 + data[1] % 3;
  data += 2;
  size -= 2;
  const auto row_blocks = static_cast<int64_t>(std::min<size_t>(64, size / static_cast<size_t>(rows) / info->block_bytes));
  if (row_blocks == 0) return 0;
  const int64_t k = row_blocks * info->block_elems;
  std::vector<float> want(static_cast<size_t>(rows * k));
  if (!dequantize(info->type, data, want.data(), rows * k).is_ok()) return 0;
  const std::optional<Tier> tier = carrier_tier(info->type, k);
  if (!tier) return 0;
  std::vector<uint8_t> carried(tier_data_bytes(*tier, rows, k));
  std::vector<float> scales(static_cast<size_t>(rows));
  if (!carry_rows(info->type, data, rows, k, carried.data(), scales.data()).is_ok()) {
    fail("carry_rows failed", info->type, 0, 0, 0);
  }
  const TierTensor tt{*tier, carried.data(), scales.data(), rows, k};
  std::vector<float> row(static_cast<size_t>(k));
  bool finite = true;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_tier_row(tt, r, row.data());
    for (int64_t j = 0; j < k; ++j) {
      const float w = want[static_cast<size_t>(r * k + j)];
      if (!same_float(row[static_cast<size_t>(j)], w)) fail("carried weight", info->type, r * k + j, row[static_cast<size_t>(j)], w);
      finite = finite && std::isfinite(w);
    }
  }
  // A non-finite weight means a non-finite block scale: the reader refuses those.
  if (finite) check_kernels(tt, info->type, data, size);
  return 0;
}
