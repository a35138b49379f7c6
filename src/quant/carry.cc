#include "quant/carry.h"

#include <cstring>

#include "quant/planes.h"

namespace ork {
namespace {

constexpr int64_t kQ4kSourceBytes = 144;  // d, dmin, scales[12], qs[128]
constexpr int64_t kQ6kSourceBytes = 210;  // ql[128], qh[64], scales[16], d
constexpr int64_t kQ5kSourceBytes = 176;  // d, dmin, scales[12], qh[32], qs[128]
constexpr int64_t kQ80SourceBytes = 34;   // d, qs[32]

// Q4_K's eight (scale, min) pairs, 6 bits each, packed in 12 bytes.
void unpack_scale_min(const uint8_t* q, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// One Q4_K super-block into the row's nibble plane and header. Source
// group g (32 weights) is the low (g even) or high (g odd) nibbles of
// qs[32 (g / 2) .. + 32], in weight order; ork's group keeps weight j in
// the low and j + 16 in the high nibble of its byte j.
void carry_q4k_block(const uint8_t* b, uint8_t* codes, uint8_t* header) {
  std::memcpy(header, b, 4);  // d, dmin: the same f16 bits
  for (int g = 0; g < 8; ++g) unpack_scale_min(b + 4, g, header + 4 + g, header + 12 + g);
  const uint8_t* qs = b + 16;
  for (int g = 0; g < 8; ++g) {
    const uint8_t* src = qs + 32 * (g / 2);
    const int shift = (g % 2) * 4;
    for (int j = 0; j < 16; ++j) {
      const auto lo = static_cast<uint8_t>((src[j] >> shift) & 0xF), hi = static_cast<uint8_t>((src[j + 16] >> shift) & 0xF);
      codes[16 * g + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// One Q5_K super-block: as Q4_K (qs at 48), the fifth bit of weight
// 64 c + 32 h + l in bit 2c + h of qh[l].
void carry_q5k_block(const uint8_t* b, int64_t j0, uint8_t* nibbles, uint8_t* bits, uint8_t* header) {
  std::memcpy(header, b, 4);
  for (int g = 0; g < 8; ++g) unpack_scale_min(b + 4, g, header + 4 + g, header + 12 + g);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int c = 0; c < 4; ++c) {
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t low = qs[32 * c + l];
        const int64_t j = j0 + 64 * c + 32 * h + l;
        planes::set_nibble(nibbles, j, static_cast<uint8_t>(h == 0 ? low & 0xF : low >> 4));
        planes::set_bits(bits, j, 1, static_cast<uint8_t>((qh[l] >> (2 * c + h)) & 1));
      }
    }
  }
}

// One Q6_K super-block: weight 128 n + 32 q + l has its low four bits in
// ql[64 n + l + 32 (q % 2)] (q < 2: low nibble, else high) and its top two
// in bits 2q, 2q + 1 of qh[32 n + l].
void carry_q6k_block(const uint8_t* b, int64_t j0, uint8_t* nibbles, uint8_t* bits, uint8_t* header) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  std::memcpy(header, b + 208, 2);       // d
  std::memcpy(header + 2, b + 192, 16);  // sub-scales, in weight order
  for (int n = 0; n < 2; ++n) {
    for (int q = 0; q < 4; ++q) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t low = ql[64 * n + l + 32 * (q % 2)];
        const auto nib = static_cast<uint8_t>(q < 2 ? low & 0xF : low >> 4);
        const auto top = static_cast<uint8_t>((qh[32 * n + l] >> (2 * q)) & 3);
        const int64_t j = j0 + 128 * n + 32 * q + l;
        planes::set_nibble(nibbles, j, nib);
        planes::set_bits(bits, j, 2, top);
      }
    }
  }
}

}  // namespace

bool quantized_source(const GgufFile& gguf) {
  for (const GgufTensorInfo& t : gguf.tensors()) {
    if (t.dims.size() < 2) continue;
    if (t.type != GgmlType::kF32 && t.type != GgmlType::kF16 && t.type != GgmlType::kBF16) return true;
  }
  return false;
}

std::optional<Tier> carrier_tier(GgmlType type, int64_t k) {
  if (type == GgmlType::kQ8_0 && k > 0 && k % kQ80Block == 0) return Tier::kQ80;
  if (k <= 0 || k % kSuperBlock != 0) return std::nullopt;
  if (type == GgmlType::kQ4_K) return Tier::kQ4k;
  if (type == GgmlType::kQ6_K) return Tier::kQ6k;
  if (type == GgmlType::kQ5_K) return Tier::kQ5k;
  return std::nullopt;
}

Status carry_rows(GgmlType type, const uint8_t* src, int64_t rows, int64_t k, uint8_t* data, float* scales) {
  const std::optional<Tier> tier = carrier_tier(type, k);
  if (!tier) {
    return error(StatusCode::kUnsupported, "no tier carries {} rows of {} weights", ggml_type_name(type), k);
  }
  std::memset(data, 0, tier_data_bytes(*tier, rows, k));
  const int64_t blocks = k / kSuperBlock;
  const int64_t b0 = *tier == Tier::kQ80 ? k : k / 2;
  uint8_t* plane1 = data + b0 * rows;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* codes = data + b0 * r;
    scales[r] = 1.0f;
    if (*tier == Tier::kQ4k) {
      const uint8_t* row = src + r * blocks * kQ4kSourceBytes;
      uint8_t* headers = plane1 + r * blocks * kQ4kHeaderBytes;
      for (int64_t b = 0; b < blocks; ++b) {
        carry_q4k_block(row + b * kQ4kSourceBytes, codes + b * kSuperBlock / 2, headers + b * kQ4kHeaderBytes);
      }
    } else if (*tier == Tier::kQ5k) {
      const uint8_t* row = src + r * blocks * kQ5kSourceBytes;
      uint8_t* bits = plane1 + r * (k / 8 + blocks * kQ4kHeaderBytes);
      uint8_t* headers = bits + k / 8;
      for (int64_t b = 0; b < blocks; ++b) {
        carry_q5k_block(row + b * kQ5kSourceBytes, b * kSuperBlock, codes, bits, headers + b * kQ4kHeaderBytes);
      }
    } else if (*tier == Tier::kQ80) {
      const int64_t n = k / kQ80Block;
      const uint8_t* row = src + r * n * kQ80SourceBytes;
      uint8_t* int8_codes = data + k * r;
      uint8_t* headers = data + k * rows + r * n * kQ80HeaderBytes;
      for (int64_t b = 0; b < n; ++b) {
        std::memcpy(headers + b * kQ80HeaderBytes, row + b * kQ80SourceBytes, 2);
        std::memcpy(int8_codes + b * kQ80Block, row + b * kQ80SourceBytes + 2, kQ80Block);
      }
    } else {
      const uint8_t* row = src + r * blocks * kQ6kSourceBytes;
      uint8_t* bits = plane1 + r * (k / 4 + blocks * kQ6kHeaderBytes);
      uint8_t* headers = bits + k / 4;
      for (int64_t b = 0; b < blocks; ++b) {
        carry_q6k_block(row + b * kQ6kSourceBytes, b * kSuperBlock, codes, bits, headers + b * kQ6kHeaderBytes);
      }
    }
  }
  return Status::ok();
}

}  // namespace ork
