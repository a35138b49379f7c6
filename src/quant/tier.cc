#include "quant/tier.h"

#include <array>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "quant/tier_impl.h"

namespace ork {
namespace {

constexpr std::array<TierInfo, kTierCount> kTiers = {{
    {Tier::kF32, "f32", 32, false},
    {Tier::kF16, "f16", 16, false},
    {Tier::kI8, "i8", 8, true},
    {Tier::kI4, "i4", 4, true},
    {Tier::kNf4, "nf4", 4, true},
    {Tier::kI5, "i5", 5, true},
    {Tier::kI6, "i6", 6, true},
    {Tier::kI8s, "i8s", 8, true},
    {Tier::kBf16, "bf16", 16, false},
    {Tier::kQ4k, "q4k", 4, false},
    {Tier::kQ6k, "q6k", 6, false},
    {Tier::kQ5k, "q5k", 5, false},
    {Tier::kQ80, "q80", 8, false},
    {Tier::kQ40, "q40", 4, false},
    {Tier::kQ41, "q41", 4, false},
    {Tier::kQ50, "q50", 5, false},
    {Tier::kQ51, "q51", 5, false},
    {Tier::kIq4nl, "iq4nl", 4, false},
    {Tier::kIq4xs, "iq4xs", 4, false},
    {Tier::kQ3k, "q3k", 3, false},
    {Tier::kQ2k, "q2k", 2, false},
}};

// Bytes per row of each plane: [first plane, second plane].
std::array<int64_t, 2> plane_row_bytes(Tier tier, int64_t k) {
  switch (tier) {
    case Tier::kF32: return {4 * k, 0};
    case Tier::kF16:
    case Tier::kBf16: return {2 * k, 0};
    case Tier::kI8: return {k, 0};
    case Tier::kI4:
    case Tier::kNf4: return {k / 2, 0};
    case Tier::kI5: return {k / 2, k / 8};
    case Tier::kI6: return {k / 2, k / 4};
    case Tier::kI8s: return {k / 2, k / 2};
    default: {
      const CarriedLayout l = carried_layout(tier);
      return {k * l.code_bits / 8, k * l.high_bits / 8 + k / l.block * l.header_bytes};
    }
  }
}

tiers::ConstRowPlanes row_planes(const TierTensor& t, int64_t r) {
  const auto [b0, b1] = plane_row_bytes(t.tier, t.k_stored);
  const uint8_t* p1 = b1 > 0 ? t.data + b0 * t.rows : nullptr;
  return {t.data + b0 * r, p1 != nullptr ? p1 + b1 * r : nullptr};
}

}  // namespace

const TierInfo& tier_info(Tier tier) { return kTiers[static_cast<size_t>(tier)]; }

std::optional<Tier> tier_from_id(uint32_t id) {
  if (id >= kTierCount) return std::nullopt;
  return static_cast<Tier>(id);
}

std::optional<Tier> tier_from_name(std::string_view name) {
  for (const TierInfo& t : kTiers) {
    if (t.name == name) return t.tier;
  }
  return std::nullopt;
}

std::string_view tier_name(Tier tier) { return tier_info(tier).name; }

std::string tier_names() {
  std::string names;
  for (const TierInfo& t : kTiers) {
    if (!names.empty()) names += ' ';
    names += t.name;
  }
  return names;
}

uint64_t tier_data_bytes(Tier tier, int64_t rows, int64_t k_stored) {
  const auto [b0, b1] = plane_row_bytes(tier, k_stored);
  return static_cast<uint64_t>((b0 + b1) * rows);
}

namespace {

double quantize_row(Tier tier, const float* row, const float* importance, int64_t k, tiers::RowPlanes out,
                    float* scale, float given_scale) {
  switch (tier) {
    case Tier::kI8: return tiers::quantize_i8_row(row, importance, k, out, scale, given_scale);
    case Tier::kI4: return tiers::quantize_i4_row(row, importance, k, out, scale, given_scale);
    case Tier::kNf4: return tiers::quantize_nf4_row(row, importance, k, out, scale, given_scale);
    case Tier::kI5: return tiers::quantize_wide_row(1, row, importance, k, out, scale, given_scale);
    case Tier::kI6: return tiers::quantize_wide_row(2, row, importance, k, out, scale, given_scale);
    case Tier::kI8s: return tiers::quantize_i8s_row(row, importance, k, out, scale, given_scale);
    default: return 0.0;
  }
}

float snap(Tier tier, float x) {
  switch (tier) {
    case Tier::kI8: return tiers::snap_i8(x);
    case Tier::kI4: return tiers::snap_i4(x);
    case Tier::kNf4: return tiers::snap_nf4(x);
    case Tier::kI5: return tiers::snap_wide(1, x);
    case Tier::kI6: return tiers::snap_wide(2, x);
    case Tier::kI8s: return tiers::snap_i8s(x);
    default: return x;
  }
}

// GPTQ on one row whose scale is already chosen: returns the weighted error.
// In U's terms (U = R^-1, the upper Cholesky factor of H^-1) weight j is
// rounded as w~_j = w_j - sum_{p<j} U_pj (w~_p - v_p) / U_pp; since R U = I
// that sum is -(sum_{p<j} R_pj (w_p - v_p)) / R_jj, over the weights' own
// differences from their rounded values, so R's rows serve as they are.
double gptq_row(Tier tier, const float* row, const float* importance, int64_t k, const double* r, tiers::RowPlanes out,
                float scale) {
  std::vector<double> pushed(static_cast<size_t>(k), 0.0);  // sum_{p<j} R_pj (w_p - v_p)
  std::vector<float> target(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    const double* rj = r + j * k;
    const double wj = static_cast<double>(row[j]) + pushed[static_cast<size_t>(j)] / rj[j];
    const double v = scale * static_cast<double>(snap(tier, static_cast<float>(wj / scale)));
    target[static_cast<size_t>(j)] = static_cast<float>(v);
    const double d = static_cast<double>(row[j]) - v;
    double* p = pushed.data();
    for (int64_t i = j + 1; i < k; ++i) p[i] += d * rj[i];
  }
  float unused;
  quantize_row(tier, target.data(), nullptr, k, out, &unused, scale);
  double err = 0.0;
  for (int64_t j = 0; j < k; ++j) {
    const double d = static_cast<double>(row[j]) - target[static_cast<size_t>(j)];
    err += (importance != nullptr ? importance[j] : 1.0f) * d * d;
  }
  return err;
}

}  // namespace

double quantize_tier(Tier tier, const float* w, const float* importance, int64_t rows, int64_t k, uint8_t* data,
                     float* scales, const double* gptq) {
  std::memset(data, 0, tier_data_bytes(tier, rows, k));
  const auto [b0, b1] = plane_row_bytes(tier, k);
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * k;
    tiers::RowPlanes out{data + b0 * r, b1 > 0 ? data + b0 * rows + b1 * r : nullptr};
    switch (tier) {
      case Tier::kF32:
      case Tier::kF16:
      case Tier::kBf16: {
        for (int64_t j = 0; j < k; ++j) {
          float v = row[j];
          if (tier == Tier::kF32) {
            std::memcpy(out.p0 + 4 * j, &v, 4);
          } else {
            const uint16_t h = tier == Tier::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
            std::memcpy(out.p0 + 2 * j, &h, 2);
            v = tier == Tier::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
          }
          const double d = static_cast<double>(row[j]) - v;
          total += (importance != nullptr ? importance[j] : 1.0f) * d * d;
        }
        break;
      }
      default: {
        const double err = quantize_row(tier, row, importance, k, out, &scales[r], 0.0f);
        total += (gptq != nullptr && scales[r] > 0.0f) ? gptq_row(tier, row, importance, k, gptq, out, scales[r]) : err;
        break;
      }
    }
  }
  return total;
}

void dequantize_tier_row(const TierTensor& t, int64_t r, float* out) {
  const tiers::ConstRowPlanes in = row_planes(t, r);
  const int64_t k = t.k_stored;
  // Carried tiers keep their scales in their blocks: no row scale.
  const float s = t.scales != nullptr ? t.scales[r] : carried_tier(t.tier) ? 1.0f : 0.0f;
  switch (t.tier) {
    case Tier::kF32: std::memcpy(out, in.p0, static_cast<size_t>(k) * 4); return;
    case Tier::kF16:
    case Tier::kBf16:
      for (int64_t j = 0; j < k; ++j) {
        uint16_t h;
        std::memcpy(&h, in.p0 + 2 * j, 2);
        out[j] = t.tier == Tier::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    case Tier::kI8: tiers::dequantize_i8_row(in, s, k, out); return;
    case Tier::kI4: tiers::dequantize_i4_row(in, s, k, out); return;
    case Tier::kNf4: tiers::dequantize_nf4_row(in, s, k, out); return;
    case Tier::kI5: tiers::dequantize_wide_row(1, in, s, k, out); return;
    case Tier::kI6: tiers::dequantize_wide_row(2, in, s, k, out); return;
    case Tier::kI8s: tiers::dequantize_i8s_row(in, s, k, out); return;
    case Tier::kQ4k: tiers::dequantize_q4k_row(in, s, k, out); return;
    case Tier::kQ6k: tiers::dequantize_q6k_row(in, s, k, out); return;
    case Tier::kQ5k: tiers::dequantize_q5k_row(in, s, k, out); return;
    case Tier::kIq4xs: tiers::dequantize_iq4xs_row(in, s, k, out); return;
    case Tier::kQ3k: tiers::dequantize_q3k_row(in, s, k, out); return;
    case Tier::kQ2k: tiers::dequantize_q2k_row(in, s, k, out); return;
    default: tiers::dequantize_block32_row(t.tier, in, s, k, out); return;
  }
}

void dequantize_i8s_high_row(const TierTensor& t, int64_t r, float* out) {
  tiers::dequantize_i8s_high_row(row_planes(t, r), t.scales[r], t.k_stored, out);
}

}  // namespace ork
