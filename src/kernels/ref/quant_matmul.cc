#include "kernels/ref/quant_matmul.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "format/gguf/dequant.h"
#include "quant/block_header.h"
#include "quant/planes.h"

namespace ork {

QuantWeights quant_weights(const TierTensor& t, bool i8s_high_only) {
  QuantWeights w;
  w.scales = t.scales;
  w.rows = t.rows;
  w.k = t.k_stored;
  w.p0 = t.data;
  switch (t.tier) {
    case Tier::kI4: w.kind = CodeKind::kI4; break;
    case Tier::kNf4: w.kind = CodeKind::kNf4; w.scale_mul = 1.0f / 127.0f; break;
    case Tier::kI5: w.kind = CodeKind::kI5; break;
    case Tier::kI6: w.kind = CodeKind::kI6; break;
    case Tier::kI8: w.kind = CodeKind::kI8; break;
    case Tier::kI8s:
      w.kind = i8s_high_only ? CodeKind::kI4 : CodeKind::kI8s;
      w.scale_mul = i8s_high_only ? 1.0f : 1.0f / 16.0f;
      break;
    case Tier::kQ4k: w.kind = CodeKind::kQ4k; break;
    case Tier::kQ6k: w.kind = CodeKind::kQ6k; break;
    case Tier::kQ5k: w.kind = CodeKind::kQ5k; break;
    case Tier::kQ80: w.kind = CodeKind::kQ80; break;
    case Tier::kQ40: w.kind = CodeKind::kQ40; break;
    case Tier::kQ41: w.kind = CodeKind::kQ41; break;
    case Tier::kQ50: w.kind = CodeKind::kQ50; break;
    case Tier::kQ51: w.kind = CodeKind::kQ51; break;
    case Tier::kIq4nl: w.kind = CodeKind::kIq4nl; break;
    case Tier::kIq4xs: w.kind = CodeKind::kIq4xs; break;
    case Tier::kQ3k: w.kind = CodeKind::kQ3k; break;
    case Tier::kQ2k: w.kind = CodeKind::kQ2k; break;
    default: return {};  // float tiers have no integer view
  }
  // Plane 1 of every row follows plane 0 of every row.
  if (plane1_row_bytes(w.kind, w.k) > 0) w.p1 = t.data + plane0_row_bytes(w.kind, w.k) * t.rows;
  return w;
}

namespace ref {

void quantize_acts(const float* x, int n, int64_t k, int8_t* q, float* scale, int32_t* sum, int max_code) {
  const auto top = static_cast<float>(max_code);
  for (int t = 0; t < n; ++t) {
    const float* xt = x + t * k;
    int8_t* qt = q + t * k;
    float amax = 0.0f;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(xt[i]));
    int32_t s = 0;
    if (amax == 0.0f) {
      std::fill(qt, qt + k, int8_t{0});
      scale[t] = 0.0f;
    } else {
      // |x| <= amax, so |x * inv| rounds to at most max_code: no clamp.
      const float inv = top / amax;
      for (int64_t i = 0; i < k; ++i) {
        qt[i] = static_cast<int8_t>(std::nearbyint(xt[i] * inv));
        s += qt[i];
      }
      scale[t] = amax / top;
    }
    sum[t] = s;
  }
}

int32_t weight_code(const QuantWeights& w, int64_t r, int64_t j) {
  const uint8_t* row0 = w.p0 + r * plane0_row_bytes(w.kind, w.k);
  const uint8_t* row1 = w.p1 != nullptr ? w.p1 + r * plane1_row_bytes(w.kind, w.k) : nullptr;
  switch (w.kind) {
    case CodeKind::kI4: return planes::get_nibble(row0, j) - 8;
    case CodeKind::kNf4: return kNf4Codes[planes::get_nibble(row0, j)];
    case CodeKind::kI5: return (planes::get_nibble(row0, j) | (planes::get_bits(row1, j, 1) << 4)) - 16;
    case CodeKind::kI6: return (planes::get_nibble(row0, j) | (planes::get_bits(row1, j, 2) << 4)) - 32;
    case CodeKind::kI8: return static_cast<int8_t>(row0[j]);
    case CodeKind::kI8s: {
      const auto byte = static_cast<uint8_t>((planes::get_nibble(row0, j) << 4) | planes::get_nibble(row1, j));
      // In int8 arithmetic, as the SIMD kernels compute it: a stored high
      // nibble of 0 (never written; i8s codes are within +-7) wraps.
      return static_cast<int8_t>(static_cast<int8_t>(byte ^ 0x80) - 8);
    }
    case CodeKind::kQ4k: return planes::get_nibble(row0, j);
    case CodeKind::kQ6k: return (planes::get_nibble(row0, j) | (planes::get_bits(row1, j, 2) << 4)) - 32;
    case CodeKind::kQ3k: return (planes::get_q3k_low(row0, j) | (planes::get_bits(row1, j, 1) << 2)) - 4;
    case CodeKind::kQ2k: return planes::get_q3k_low(row0, j);
    case CodeKind::kQ5k: return planes::get_nibble(row0, j) | (planes::get_bits(row1, j, 1) << 4);
    case CodeKind::kQ80: return static_cast<int8_t>(row0[j]);
    case CodeKind::kQ40: return planes::get_nibble(row0, j) - 8;
    case CodeKind::kQ41: return planes::get_nibble(row0, j);
    case CodeKind::kQ50: return (planes::get_nibble(row0, j) | (planes::get_bits(row1, j, 1) << 4)) - 16;
    case CodeKind::kQ51: return planes::get_nibble(row0, j) | (planes::get_bits(row1, j, 1) << 4);
    case CodeKind::kIq4nl:
    case CodeKind::kIq4xs: return kIq4nlValues[planes::get_nibble(row0, j)];
  }
  return 0;
}

namespace {

const uint8_t* block_headers(const QuantWeights& w, int64_t r) {
  return w.p1 + r * plane1_row_bytes(w.kind, w.k) + block_headers_offset(w.kind, w.k);
}

// Row r as llama.cpp dequantizes the carried blocks (quant/tier_block.cc).
void dequantize_block_row(const QuantWeights& w, int64_t r, float* out) {
  const float scale = 1.0f;  // the scales are the blocks'
  const uint8_t* headers = block_headers(w, r);
  if (block32_kind(w.kind)) {
    const int64_t hb = carried_layout(block_tier(w.kind)).header_bytes;
    for (int64_t j = 0; j < w.k; ++j) {
      const uint8_t* h = headers + j / 32 * hb;
      const float v = static_cast<float>(weight_code(w, r, j)) * load_f16_at(h);
      out[j] = scale * (hb == 4 ? v + load_f16_at(h + 2) : v);
    }
    return;
  }
  for (int64_t b = 0; b < w.k / kSuperBlock; ++b) {
    for (int64_t l = 0; l < kSuperBlock; ++l) {
      const int64_t j = b * kSuperBlock + l;
      const auto q = static_cast<float>(weight_code(w, r, j));
      if (w.kind == CodeKind::kQ6k || w.kind == CodeKind::kQ3k) {
        const Q6kHeader h = q6k_header(headers, b);
        out[j] = scale * (h.d * static_cast<float>(h.sc[l / 16]) * q);
      } else if (w.kind == CodeKind::kIq4xs) {
        const uint8_t* h = headers + b * kIq4xsHeaderBytes;
        out[j] = scale * (load_f16_at(h) * static_cast<float>(static_cast<int8_t>(h[2 + l / 32])) * q);
      } else if (w.kind == CodeKind::kQ2k) {
        const uint8_t* h = headers + b * kQ2kHeaderBytes;
        const uint8_t sm = h[4 + l / 16];
        const float dl = load_f16_at(h) * static_cast<float>(sm & 0xF), ml = load_f16_at(h + 2) * static_cast<float>(sm >> 4);
        out[j] = scale * (dl * q - ml);
      } else {
        const Q4kHeader h = q4k_header(headers, b);
        out[j] = scale * (h.d * static_cast<float>(h.sc[l / 32]) * q - h.dmin * static_cast<float>(h.m[l / 32]));
      }
    }
  }
}

// sum over blocks of (d * as) * (integer sum over sub-blocks of sc * dot)
// - (dmin * as) * (integer sum of m * activation sum), in block order, with
// `as` the activation block's scale (act_block(kind) weights each).
float block_row_dot(const QuantWeights& w, int64_t r, const int8_t* a, const float* as) {
  const uint8_t* headers = block_headers(w, r);
  if (block32_kind(w.kind)) {
    // d * as * dot, and for q41 / q51 + m * as * (activation sum).
    const int64_t hb = carried_layout(block_tier(w.kind)).header_bytes;
    float acc = 0.0f;
    for (int64_t b = 0; b < w.k / 32; ++b) {
      int32_t dot = 0, asum = 0;
      for (int64_t l = 0; l < 32; ++l) {
        dot += weight_code(w, r, b * 32 + l) * a[b * 32 + l];
        asum += a[b * 32 + l];
      }
      const uint8_t* h = headers + b * hb;
      acc += load_f16_at(h) * as[b] * static_cast<float>(dot);
      if (hb == 4) acc += load_f16_at(h + 2) * as[b] * static_cast<float>(asum);
    }
    return acc;
  }
  const bool mins = w.kind == CodeKind::kQ4k || w.kind == CodeKind::kQ5k;
  const bool q2k = w.kind == CodeKind::kQ2k;
  const int64_t sub = w.kind == CodeKind::kQ6k || w.kind == CodeKind::kQ3k || q2k ? 16 : 32;
  float acc = 0.0f;
  for (int64_t b = 0; b < w.k / kSuperBlock; ++b) {
    int32_t isum = 0, msum = 0;
    for (int64_t s = 0; s < kSuperBlock / sub; ++s) {
      int32_t dot = 0, asum = 0;
      for (int64_t l = 0; l < sub; ++l) {
        const int64_t j = b * kSuperBlock + s * sub + l;
        dot += weight_code(w, r, j) * a[j];
        asum += a[j];
      }
      if (mins) {
        const Q4kHeader h = q4k_header(headers, b);
        isum += h.sc[s] * dot;
        msum += h.m[s] * asum;
      } else if (q2k) {
        const uint8_t sm = headers[b * kQ2kHeaderBytes + 4 + s];
        isum += (sm & 0xF) * dot;
        msum += (sm >> 4) * asum;
      } else if (w.kind == CodeKind::kIq4xs) {
        isum += static_cast<int8_t>(headers[b * kIq4xsHeaderBytes + 2 + s]) * dot;
      } else {
        isum += q6k_header(headers, b).sc[s] * dot;
      }
    }
    if (mins || q2k) {
      const uint8_t* h = headers + b * (q2k ? kQ2kHeaderBytes : kQ4kHeaderBytes);
      acc += load_f16_at(h) * as[b] * static_cast<float>(isum) - load_f16_at(h + 2) * as[b] * static_cast<float>(msum);
    } else if (w.kind == CodeKind::kIq4xs) {
      acc += load_f16_at(headers + b * kIq4xsHeaderBytes) * as[b] * static_cast<float>(isum);
    } else {
      acc += q6k_header(headers, b).d * as[b] * static_cast<float>(isum);
    }
  }
  return acc;
}

}  // namespace

void dequantize_codes_row(const QuantWeights& w, int64_t r, float* out) {
  if (block_kind(w.kind)) return dequantize_block_row(w, r, out);
  const float scale = w.scales[r] * w.scale_mul;
  for (int64_t j = 0; j < w.k; ++j) out[j] = scale * static_cast<float>(weight_code(w, r, j));
}

void block_acts(const QuantActs& a, int64_t block, std::vector<int8_t>& q, std::vector<float>& scale) {
  const int64_t nb = a.k / block;
  scale.resize(static_cast<size_t>(a.n * nb));
  if (a.f32 == nullptr) {
    q.assign(a.q, a.q + a.n * a.k);
    for (int t = 0; t < a.n; ++t) std::fill_n(&scale[static_cast<size_t>(t * nb)], nb, a.scale[t]);
    return;
  }
  q.resize(static_cast<size_t>(a.n * a.k));
  std::vector<int32_t> sums(scale.size());
  quantize_acts(a.f32, static_cast<int>(a.n * nb), block, q.data(), scale.data(), sums.data());
}

void quant_matmul(const QuantWeights& w, const QuantActs& a, float* y, int64_t ldy, int64_t row_begin,
                  int64_t row_end) {
  if (block_kind(w.kind)) {
    std::vector<int8_t> q;
    std::vector<float> as;
    block_acts(a, act_block(w.kind), q, as);
    const int64_t nb = a.k / act_block(w.kind);
    for (int64_t r = row_begin; r < row_end; ++r) {
      for (int t = 0; t < a.n; ++t) y[t * ldy + r] = block_row_dot(w, r, &q[static_cast<size_t>(t * a.k)], &as[static_cast<size_t>(t * nb)]);
    }
    return;
  }
  if (w.kind == CodeKind::kI8 && a.f32 != nullptr) {
    // Per 32 activations: ws * sum over blocks of (as * dot), in block order.
    std::vector<int8_t> q;
    std::vector<float> as;
    block_acts(a, act_block(w.kind), q, as);
    const int64_t nb = a.k / 32;
    for (int64_t r = row_begin; r < row_end; ++r) {
      const float ws = w.scales[r] * w.scale_mul;
      for (int t = 0; t < a.n; ++t) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          int32_t dot = 0;
          for (int64_t l = 0; l < 32; ++l) dot += weight_code(w, r, b * 32 + l) * q[static_cast<size_t>(t * a.k + b * 32 + l)];
          acc += as[static_cast<size_t>(t * nb + b)] * static_cast<float>(dot);
        }
        y[t * ldy + r] = ws * acc;
      }
    }
    return;
  }
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float ws = w.scales[r] * w.scale_mul;
    for (int t = 0; t < a.n; ++t) {
      const int8_t* at = a.q + t * a.k;
      int32_t dot = 0;
      for (int64_t j = 0; j < w.k; ++j) dot += weight_code(w, r, j) * at[j];
      y[t * ldy + r] = ws * a.scale[t] * static_cast<float>(dot);
    }
  }
}

}  // namespace ref
}  // namespace ork
