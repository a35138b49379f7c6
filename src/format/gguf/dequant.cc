#include "format/gguf/dequant.h"

#include <cmath>
#include <cstring>

#include "core/half.h"

namespace ork {

const int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

namespace {

constexpr int kQK = 32;    // legacy block size
constexpr int kQKK = 256;  // k-quant super-block size

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

float load_f16(const uint8_t* p) { return f16_to_f32(load_u16(p)); }

// Blocks are read byte-wise (not through packed structs) so unaligned data
// is fine on every architecture.

void dequant_q4_0(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 18, y += kQK) {
    const float d = load_f16(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 20, y += kQK) {
    const float d = load_f16(b);
    const float m = load_f16(b + 2);
    const uint8_t* qs = b + 4;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      y[j + kQK / 2] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

// Q5_0/Q5_1: the fifth bit of weight j lives in bit j of a 32-bit mask.
void dequant_q5(const uint8_t* b, float* y, int64_t nb, bool has_min) {
  const int block_bytes = has_min ? 24 : 22;
  for (int64_t i = 0; i < nb; ++i, b += block_bytes, y += kQK) {
    const float d = load_f16(b);
    const float m = has_min ? load_f16(b + 2) : 0.0f;
    uint32_t qh;
    std::memcpy(&qh, b + (has_min ? 4 : 2), 4);
    const uint8_t* qs = b + (has_min ? 8 : 6);
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t h0 = ((qh >> j) << 4) & 0x10;
      const uint8_t h1 = (qh >> (j + 12)) & 0x10;
      const int q0 = (qs[j] & 0x0F) | h0;
      const int q1 = (qs[j] >> 4) | h1;
      if (has_min) {
        y[j] = static_cast<float>(q0) * d + m;
        y[j + kQK / 2] = static_cast<float>(q1) * d + m;
      } else {
        y[j] = static_cast<float>(q0 - 16) * d;
        y[j + kQK / 2] = static_cast<float>(q1 - 16) * d;
      }
    }
  }
}

void dequant_q8_0(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 34, y += kQK) {
    const float d = load_f16(b);
    const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(qs[j]) * d;
  }
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin.
void dequant_q2_k(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 84) {
    const uint8_t* scales = b;
    const uint8_t* q = b + 16;
    const float d = load_f16(b + 80);
    const float dmin = load_f16(b + 82);
    int is = 0;
    for (int n = 0; n < kQKK; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) {
            *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
          }
        }
        shift += 2;
      }
      q += 32;
    }
  }
}

// Q3_K: hmask[32], qs[64], scales[12] (sixteen 6-bit scales), d.
void dequant_q3_k(const uint8_t* b, float* y, int64_t nb) {
  constexpr uint32_t kmask1 = 0x03030303;
  constexpr uint32_t kmask2 = 0x0f0f0f0f;
  for (int64_t i = 0; i < nb; ++i, b += 110) {
    const uint8_t* hm = b;
    const uint8_t* q = b + 32;
    const float d_all = load_f16(b + 108);
    uint32_t aux[4];
    std::memcpy(aux, b + 96, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    int8_t scales[16];
    std::memcpy(scales, aux, 16);
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < kQKK; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * static_cast<float>(scales[is++] - 32);
          for (int l = 0; l < 16; ++l) {
            const int k = l + 16 * half;
            const int v = ((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
        shift += 2;
        m <<= 1;
      }
      q += 32;
    }
  }
}

// Eight 6-bit (scale, min) pairs packed in 12 bytes, shared by Q4_K and Q5_K.
void scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K: d, dmin, scales[12], qs[128].
void dequant_q4_k(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 144) {
    const float d = load_f16(b);
    const float dmin = load_f16(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* q = b + 16;
    for (int j = 0, is = 0; j < kQKK; j += 64, is += 2, q += 32) {
      uint8_t sc, m;
      scale_min_k4(is, scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(is + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// Q5_K: d, dmin, scales[12], qh[32], qs[128].
void dequant_q5_k(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 176) {
    const float d = load_f16(b);
    const float dmin = load_f16(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + 48;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < kQKK; j += 64, is += 2, ql += 32) {
      uint8_t sc, m;
      scale_min_k4(is, scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(is + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}

// Q6_K: ql[128], qh[64], scales[16] (int8), d.
void dequant_q6_k(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 210) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = load_f16(b + 208);
    for (int n = 0; n < kQKK; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void dequant_iq4_nl(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 18, y += kQK) {
    const float d = load_f16(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[qs[j] & 0xF]);
      y[j + kQK / 2] = d * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
    }
  }
}

// IQ4_XS: d, scales_h (u16), scales_l[4], qs[128]; 6-bit sub-block scales.
void dequant_iq4_xs(const uint8_t* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, b += 136) {
    const float d = load_f16(b);
    const uint16_t scales_h = load_u16(b + 2);
    const uint8_t* scales_l = b + 4;
    const uint8_t* qs = b + 8;
    for (int ib = 0; ib < kQKK / 32; ++ib, y += 32, qs += 16) {
      const int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace

bool can_dequantize(GgmlType type) {
  const auto info = ggml_type_info(static_cast<uint32_t>(type));
  return info && info->dequantizable;
}

Status dequantize(GgmlType type, const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return Status::ok();
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_f16(b + 2 * i);
      return Status::ok();
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(b + 2 * i));
      return Status::ok();
    case GgmlType::kQ4_0: dequant_q4_0(b, dst, n / kQK); return Status::ok();
    case GgmlType::kQ4_1: dequant_q4_1(b, dst, n / kQK); return Status::ok();
    case GgmlType::kQ5_0: dequant_q5(b, dst, n / kQK, false); return Status::ok();
    case GgmlType::kQ5_1: dequant_q5(b, dst, n / kQK, true); return Status::ok();
    case GgmlType::kQ8_0: dequant_q8_0(b, dst, n / kQK); return Status::ok();
    case GgmlType::kQ2_K: dequant_q2_k(b, dst, n / kQKK); return Status::ok();
    case GgmlType::kQ3_K: dequant_q3_k(b, dst, n / kQKK); return Status::ok();
    case GgmlType::kQ4_K: dequant_q4_k(b, dst, n / kQKK); return Status::ok();
    case GgmlType::kQ5_K: dequant_q5_k(b, dst, n / kQKK); return Status::ok();
    case GgmlType::kQ6_K: dequant_q6_k(b, dst, n / kQKK); return Status::ok();
    case GgmlType::kIQ4_NL: dequant_iq4_nl(b, dst, n / kQK); return Status::ok();
    case GgmlType::kIQ4_XS: dequant_iq4_xs(b, dst, n / kQKK); return Status::ok();
    default: break;
  }
  return error(StatusCode::kUnsupported, "no dequantizer for ggml type {}", ggml_type_name(type));
}

bool can_quantize(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 || type == GgmlType::kQ8_0 ||
         type == GgmlType::kQ4_0;
}

Status quantize(GgmlType type, const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  auto store_f16 = [](uint8_t* p, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(p, &h, 2);
  };
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, x, static_cast<size_t>(n) * 4); return Status::ok();
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) store_f16(out + 2 * i, x[i]);
      return Status::ok();
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return Status::ok();
    case GgmlType::kQ8_0:
      for (int64_t i = 0; i < n / kQK; ++i, x += kQK, out += 34) {
        float amax = 0;
        for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        store_f16(out, d);
        for (int j = 0; j < kQK; ++j) out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[j] * id)));
      }
      return Status::ok();
    case GgmlType::kQ4_0:
      // As ggml: the signed extreme maps to -8, so d = max / -8.
      for (int64_t i = 0; i < n / kQK; ++i, x += kQK, out += 18) {
        float amax = 0, max = 0;
        for (int j = 0; j < kQK; ++j) {
          if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
          }
        }
        const float d = max / -8.0f;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        store_f16(out, d);
        for (int j = 0; j < kQK / 2; ++j) {
          const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
          const int q1 = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
          out[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
      }
      return Status::ok();
    default: break;
  }
  return error(StatusCode::kUnsupported, "no quantizer for ggml type {}", ggml_type_name(type));
}

}  // namespace ork
