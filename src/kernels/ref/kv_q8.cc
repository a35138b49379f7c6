#include "kernels/ref/kv_q8.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/half.h"
#include "core/kv_layout.h"
#include "kernels/ref/ops.h"

namespace ork::ref {

void quantize_q8_row(const float* x, int head_dim, int8_t* codes, float* scales) {
  for (int b = 0; b < head_dim / kKvBlock; ++b) {
    const float* xb = x + b * kKvBlock;
    float amax = 0.0f;
    for (int i = 0; i < kKvBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < kKvBlock; ++i) codes[b * kKvBlock + i] = static_cast<int8_t>(std::nearbyint(xb[i] * inv));
    scales[b] = amax / 127.0f;
  }
}

void store_key_q8(const float* x, int head_dim, int64_t pos, int8_t* codes, float* scales) {
  int8_t c[512];
  float s[512 / kKvBlock];
  for (int i0 = 0; i0 < head_dim; i0 += 512) {  // rows longer than 512 in pieces (whole blocks)
    const int n = std::min(512, head_dim - i0);
    quantize_q8_row(x + i0, n, c, s);
    for (int i = 0; i < n; ++i) codes[KvQ8Layout::key_code(pos, i0 + i, head_dim)] = c[i];
    for (int b = 0; b < n / kKvBlock; ++b) scales[KvQ8Layout::key_scale(pos, i0 / kKvBlock + b, head_dim)] = s[b];
  }
}

void store_value_q8(const float* x, int head_dim, int64_t pos, int8_t* codes, float* scales) {
  quantize_q8_row(x, head_dim, codes + KvQ8Layout::value_code(pos, 0, head_dim),
                  scales + KvQ8Layout::value_scale(pos, 0, head_dim));
}

void attention_group_q8(const float* q, int group, const int8_t* k_codes, const float* k_scales,
                        const int8_t* v_codes, const float* v_scales, const uint16_t* v16, int64_t n_kv, int head_dim,
                        float scale, float* scores, float* out) {
  const int blocks = head_dim / kKvBlock;
  std::vector<int8_t> qc(static_cast<size_t>(head_dim));
  std::vector<float> qs(static_cast<size_t>(blocks));
  for (int g = 0; g < group; ++g) {
    quantize_q8_row(q + g * head_dim, head_dim, qc.data(), qs.data());
    float* sg = scores + g * ((n_kv + kKvTile - 1) / kKvTile * kKvTile);
    for (int64_t p = 0; p < n_kv; ++p) {
      double score = 0.0;
      for (int b = 0; b < blocks; ++b) {
        int32_t dot = 0;
        for (int i = b * kKvBlock; i < (b + 1) * kKvBlock; ++i) {
          dot += qc[static_cast<size_t>(i)] * k_codes[KvQ8Layout::key_code(p, i, head_dim)];
        }
        score += static_cast<double>(qs[static_cast<size_t>(b)]) * k_scales[KvQ8Layout::key_scale(p, b, head_dim)] * dot;
      }
      sg[p] = static_cast<float>(score) * scale;
    }
    softmax(sg, n_kv);
    for (int i = 0; i < head_dim; ++i) {
      double acc = 0.0;
      for (int64_t p = 0; p < n_kv; ++p) {
        const float v = v_codes != nullptr
                            ? v_scales[KvQ8Layout::value_scale(p, i / kKvBlock, head_dim)] *
                                  static_cast<float>(v_codes[KvQ8Layout::value_code(p, i, head_dim)])
                            : f16_to_f32(v16[p * head_dim + i]);
        acc += static_cast<double>(sg[p]) * v;
      }
      out[g * head_dim + i] = static_cast<float>(acc);
    }
  }
}

}  // namespace ork::ref
