// Carried rows as floats: the dequantization llama.cpp applies to the
// blocks they carry (Q3_K to Q6_K, the 32-weight types, IQ4_XS), operation for operation (so
// a carried row reads back bit for bit what the GGUF's own dequantizer
// gives).
#include "format/gguf/dequant.h"
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
  const uint8_t* headers = in.p1 + carried_headers_offset(Tier::kQ5k, k);
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

void dequantize_block32_row(Tier tier, ConstRowPlanes in, float scale, int64_t k, float* out) {
  const CarriedLayout l = carried_layout(tier);
  const uint8_t* headers = in.p1 + carried_headers_offset(tier, k);
  for (int64_t b = 0; b < k / 32; ++b) {
    const float d = load_f16_at(headers + b * l.header_bytes);
    const float m = l.header_bytes == 4 ? load_f16_at(headers + b * l.header_bytes + 2) : 0.0f;
    for (int64_t l2 = 0; l2 < 32; ++l2) {
      const int64_t j = b * 32 + l2;
      float v = 0.0f;
      switch (tier) {
        case Tier::kQ80: v = static_cast<float>(static_cast<int8_t>(in.p0[j])) * d; break;
        case Tier::kQ40: v = static_cast<float>(planes::get_nibble(in.p0, j) - 8) * d; break;
        case Tier::kQ41: v = static_cast<float>(planes::get_nibble(in.p0, j)) * d + m; break;
        case Tier::kQ50:
          v = static_cast<float>((planes::get_nibble(in.p0, j) | (planes::get_bits(in.p1, j, 1) << 4)) - 16) * d;
          break;
        case Tier::kQ51:
          v = static_cast<float>(planes::get_nibble(in.p0, j) | (planes::get_bits(in.p1, j, 1) << 4)) * d + m;
          break;
        case Tier::kIq4nl: v = d * static_cast<float>(kIq4nlValues[planes::get_nibble(in.p0, j)]); break;
        default: break;
      }
      out[j] = scale * v;
    }
  }
}

void dequantize_iq4xs_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    const uint8_t* h = in.p1 + b * kIq4xsHeaderBytes;
    const float d = load_f16_at(h);
    for (int64_t g = 0; g < kSuperBlock / 32; ++g) {
      const float dl = d * static_cast<float>(static_cast<int8_t>(h[2 + g]));
      for (int64_t l = 0; l < 32; ++l) {
        const int64_t j = b * kSuperBlock + g * 32 + l;
        out[j] = scale * (dl * static_cast<float>(kIq4nlValues[planes::get_nibble(in.p0, j)]));
      }
    }
  }
}

void dequantize_q6k_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  const uint8_t* headers = in.p1 + carried_headers_offset(Tier::kQ6k, k);
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    const Q6kHeader h = q6k_header(headers, b);
    for (int64_t l = 0; l < kSuperBlock; ++l) {
      const int64_t j = b * kSuperBlock + l;
      const int q = (planes::get_nibble(in.p0, j) | (planes::get_bits(in.p1, j, 2) << 4)) - 32;
      out[j] = scale * (h.d * static_cast<float>(h.sc[l / 16]) * static_cast<float>(q));
    }
  }
}

void dequantize_q3k_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  const uint8_t* headers = in.p1 + carried_headers_offset(Tier::kQ3k, k);
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    const Q6kHeader h = q6k_header(headers, b);  // the same d, int8 sc[16]
    for (int64_t l = 0; l < kSuperBlock; ++l) {
      const int64_t j = b * kSuperBlock + l;
      const int q = (planes::get_q3k_low(in.p0, j) | (planes::get_bits(in.p1, j, 1) << 2)) - 4;
      out[j] = scale * (h.d * static_cast<float>(h.sc[l / 16]) * static_cast<float>(q));
    }
  }
}

void dequantize_q2k_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    const uint8_t* h = in.p1 + b * kQ2kHeaderBytes;
    const float d = load_f16_at(h), dmin = load_f16_at(h + 2);
    for (int64_t l = 0; l < kSuperBlock; ++l) {
      const int64_t j = b * kSuperBlock + l;
      const uint8_t sm = h[4 + l / 16];
      const float dl = d * static_cast<float>(sm & 0xF), ml = dmin * static_cast<float>(sm >> 4);
      out[j] = scale * (dl * static_cast<float>(planes::get_q3k_low(in.p0, j)) - ml);
    }
  }
}

}  // namespace ork::tiers
