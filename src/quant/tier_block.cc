// Carried rows as floats: the dequantization llama.cpp applies to the
// Q4_K, Q5_K, Q6_K and Q8_0 blocks they carry, operation for operation (so
// a carried row reads back bit for bit what the GGUF's own dequantizer
// gives).
#include "quant/block_header.h"
#include "quant/planes.h"
#include "quant/tier_impl.h"

namespace ork::tiers {

void dequantize_q4k_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    const Q4kHeader h = q4k_header(in.p1, b);
    for (int64_t g = 0; g < kSuperBlock / 32; ++g) {
      const float d1 = h.d * static_cast<float>(h.sc[g]), m1 = h.dmin * static_cast<float>(h.m[g]);
      for (int64_t l = 0; l < 32; ++l) {
        const int64_t j = b * kSuperBlock + g * 32 + l;
        out[j] = scale * (d1 * static_cast<float>(planes::get_nibble(in.p0, j)) - m1);
      }
    }
  }
}

void dequantize_q5k_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  const uint8_t* headers = in.p1 + k / 8;
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    const Q4kHeader h = q4k_header(headers, b);
    for (int64_t g = 0; g < kSuperBlock / 32; ++g) {
      const float d1 = h.d * static_cast<float>(h.sc[g]), m1 = h.dmin * static_cast<float>(h.m[g]);
      for (int64_t l = 0; l < 32; ++l) {
        const int64_t j = b * kSuperBlock + g * 32 + l;
        const int q = planes::get_nibble(in.p0, j) | (planes::get_bits(in.p1, j, 1) << 4);
        out[j] = scale * (d1 * static_cast<float>(q) - m1);
      }
    }
  }
}

void dequantize_q80_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  for (int64_t b = 0; b < k / kQ80Block; ++b) {
    const float d = load_f16_at(in.p1 + b * kQ80HeaderBytes);
    for (int64_t l = 0; l < kQ80Block; ++l) {
      const int64_t j = b * kQ80Block + l;
      out[j] = scale * (static_cast<float>(static_cast<int8_t>(in.p0[j])) * d);
    }
  }
}

void dequantize_q6k_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  const uint8_t* headers = in.p1 + k / 4;
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    const Q6kHeader h = q6k_header(headers, b);
    for (int64_t l = 0; l < kSuperBlock; ++l) {
      const int64_t j = b * kSuperBlock + l;
      const int q = (planes::get_nibble(in.p0, j) | (planes::get_bits(in.p1, j, 2) << 4)) - 32;
      out[j] = scale * (h.d * static_cast<float>(h.sc[l / 16]) * static_cast<float>(q));
    }
  }
}

}  // namespace ork::tiers
