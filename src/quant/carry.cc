#include "quant/carry.h"

#include <cstring>

#include "quant/planes.h"

namespace ork {
namespace {

constexpr int64_t kQ4kSourceBytes = 144;  // d, dmin, scales[12], qs[128]
constexpr int64_t kQ6kSourceBytes = 210;  // ql[128], qh[64], scales[16], d
constexpr int64_t kQ5kSourceBytes = 176;  // d, dmin, scales[12], qh[32], qs[128]
constexpr int64_t kIq4xsSourceBytes = 136;  // d, scales_h, scales_l[4], qs[128]
constexpr int64_t kQ3kSourceBytes = 110;    // hmask[32], qs[64], scales[12], d
constexpr int64_t kQ2kSourceBytes = 84;     // scales[16], qs[64], d, dmin

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

// Source group g (32 weights) of a Q4_K / Q5_K block is the low (g even)
// or high (g odd) nibbles of qs[32 (g / 2) .. + 32], in weight order; ork's
// group keeps weight j in the low and j + 16 in the high nibble of its byte
// j. Eight bytes at a time (a conversion on load moves gigabytes).
void carry_k_nibbles(const uint8_t* qs, uint8_t* codes) {
  constexpr uint64_t kLow = 0x0F0F0F0F0F0F0F0FULL;
  for (int pair = 0; pair < 4; ++pair) {
    const uint8_t* src = qs + 32 * pair;
    for (int j = 0; j < 16; j += 8) {
      uint64_t lo, hi;
      std::memcpy(&lo, src + j, 8);
      std::memcpy(&hi, src + 16 + j, 8);
      const uint64_t even = (lo & kLow) | ((hi & kLow) << 4);  // group 2 pair
      const uint64_t odd = ((lo >> 4) & kLow) | (hi & ~kLow);  // group 2 pair + 1
      std::memcpy(codes + 32 * pair + j, &even, 8);
      std::memcpy(codes + 32 * pair + 16 + j, &odd, 8);
    }
  }
}

// One Q4_K super-block into the row's nibble plane and header.
void carry_q4k_block(const uint8_t* b, uint8_t* codes, uint8_t* /*bits*/, uint8_t* header) {
  std::memcpy(header, b, 4);  // d, dmin: the same f16 bits
  for (int g = 0; g < 8; ++g) unpack_scale_min(b + 4, g, header + 4 + g, header + 12 + g);
  carry_k_nibbles(b + 16, codes);
}

// One Q5_K super-block: as Q4_K (qs at 48), the fifth bit of weight
// 64 c + 32 h + l in bit 2c + h of qh[l]. The nibbles are Q4_K's; the
// fifth bits of each group of 32 form its 4 bytes of ork's bit plane.
void carry_q5k_block(const uint8_t* b, uint8_t* nibbles, uint8_t* bits, uint8_t* header) {
  std::memcpy(header, b, 4);
  for (int g = 0; g < 8; ++g) unpack_scale_min(b + 4, g, header + 4 + g, header + 12 + g);
  const uint8_t* qh = b + 16;
  carry_k_nibbles(b + 48, nibbles);
  for (int g = 0; g < 8; ++g) {
    for (int i = 0; i < 4; ++i) {
      uint8_t v = 0;
      for (int l = 0; l < 8; ++l) v = static_cast<uint8_t>(v | (((qh[8 * i + l] >> g) & 1) << l));
      bits[4 * g + i] = v;
    }
  }
}

// One IQ4_XS super-block: d, scales_h (u16), scales_l[4], qs[128]. Group
// g's six-bit scale is ls = low nibble g of scales_l | 2 bits g of
// scales_h << 4, applied as ls - 32; its 16 bytes of nibbles are ork's
// group layout already.
void carry_iq4xs_block(const uint8_t* b, uint8_t* codes, uint8_t* /*bits*/, uint8_t* header) {
  std::memcpy(header, b, 2);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  for (int g = 0; g < 8; ++g) {
    const int ls = ((b[4 + g / 2] >> (4 * (g % 2))) & 0xF) | (((scales_h >> (2 * g)) & 3) << 4);
    header[2 + g] = static_cast<uint8_t>(static_cast<int8_t>(ls - 32));
  }
  std::memcpy(codes, b + 8, 128);
}

// One Q6_K super-block: weight 128 n + 32 q + l has its low four bits in
// ql[64 n + l + 32 (q % 2)] (q < 2: low nibble, else high) and its top two
// in bits 2q, 2q + 1 of qh[32 n + l]. The codes are gathered in weight
// order first, then packed group by group into ork's nibble and 2-bit
// planes (byte j of a group: weights j and j + 16; 2-bit byte i: weights
// 4i .. 4i + 3 from the low bits up).
void carry_q6k_block(const uint8_t* b, uint8_t* nibbles, uint8_t* bits, uint8_t* header) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  std::memcpy(header, b + 208, 2);       // d
  std::memcpy(header + 2, b + 192, 16);  // sub-scales, in weight order
  uint8_t q[256];
  for (int n = 0; n < 2; ++n) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t lo0 = ql[64 * n + l], lo1 = ql[64 * n + l + 32], hi = qh[32 * n + l];
      q[128 * n + l] = static_cast<uint8_t>((lo0 & 0xF) | ((hi & 3) << 4));
      q[128 * n + 32 + l] = static_cast<uint8_t>((lo1 & 0xF) | (((hi >> 2) & 3) << 4));
      q[128 * n + 64 + l] = static_cast<uint8_t>((lo0 >> 4) | (((hi >> 4) & 3) << 4));
      q[128 * n + 96 + l] = static_cast<uint8_t>((lo1 >> 4) | (((hi >> 6) & 3) << 4));
    }
  }
  for (int g = 0; g < 8; ++g) {
    const uint8_t* c = q + 32 * g;
    for (int j = 0; j < 16; ++j) nibbles[16 * g + j] = static_cast<uint8_t>((c[j] & 0xF) | ((c[j + 16] & 0xF) << 4));
    for (int i = 0; i < 8; ++i) {
      bits[8 * g + i] = static_cast<uint8_t>((c[4 * i] >> 4) | ((c[4 * i + 1] >> 4) << 2) | ((c[4 * i + 2] >> 4) << 4) |
                                             ((c[4 * i + 3] >> 4) << 6));
    }
  }
}

// One Q3_K super-block: weight 128 n + 32 j + l has its low two bits at
// 2j in qs[32 n + l] and its third in bit 4n + j of hmask[l]; the sixteen
// six-bit sub-scales are packed in 12 bytes (low nibbles in bytes 0..7,
// top two bits in 8..11) and applied as sc - 32. The codes go to ork's
// step-ordered 2-bit plane and its bit plane (quant/tier.h).
void carry_q3k_block(const uint8_t* b, uint8_t* low, uint8_t* bits, uint8_t* header) {
  const uint8_t* hm = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  std::memcpy(header, b + 108, 2);  // d
  for (int i = 0; i < 16; ++i) {
    const int lo = (sc[i % 8] >> (4 * (i / 8))) & 0xF;
    const int hi = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
    header[2 + i] = static_cast<uint8_t>(static_cast<int8_t>((lo | (hi << 4)) - 32));
  }
  std::memset(low, 0, kSuperBlock / 4);
  std::memset(bits, 0, kSuperBlock / 8);
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        const int w = 128 * n + 32 * j + l;
        planes::set_q3k_low(low, w, static_cast<uint8_t>((qs[32 * n + l] >> (2 * j)) & 3));
        planes::set_bits(bits, w, 1, static_cast<uint8_t>((hm[l] >> (4 * n + j)) & 1));
      }
    }
  }
}

// One Q2_K super-block: weight 128 n + 32 j + l at 2j in qs[32 n + l], as
// Q3_K's low bits; d, dmin and the sixteen (scale | min << 4) bytes as they are.
void carry_q2k_block(const uint8_t* b, uint8_t* codes, uint8_t* /*bits*/, uint8_t* header) {
  std::memcpy(header, b + 80, 4);  // d, dmin
  std::memcpy(header + 4, b, 16);  // scales and mins, a nibble each
  std::memset(codes, 0, kSuperBlock / 4);
  const uint8_t* qs = b + 16;
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        planes::set_q3k_low(codes, 128 * n + 32 * j + l, static_cast<uint8_t>((qs[32 * n + l] >> (2 * j)) & 3));
      }
    }
  }
}

// The super-block types: bytes per source block and its carrier.
struct SuperBlockSource {
  int64_t bytes = 0;
  void (*carry)(const uint8_t* block, uint8_t* codes, uint8_t* bits, uint8_t* header) = nullptr;
};
SuperBlockSource super_block_source(Tier tier) {
  switch (tier) {
    case Tier::kQ3k: return {kQ3kSourceBytes, carry_q3k_block};
    case Tier::kQ2k: return {kQ2kSourceBytes, carry_q2k_block};
    case Tier::kQ4k: return {kQ4kSourceBytes, carry_q4k_block};
    case Tier::kQ5k: return {kQ5kSourceBytes, carry_q5k_block};
    case Tier::kQ6k: return {kQ6kSourceBytes, carry_q6k_block};
    case Tier::kIq4xs: return {kIq4xsSourceBytes, carry_iq4xs_block};
    default: return {};
  }
}

// The 32-weight blocks: bytes per block, and where d, m, the fifth bits
// and the nibbles (or int8 codes) sit in one (-1: absent).
struct Block32Source {
  int bytes, m_at, qh_at, qs_at;
};
Block32Source block32_source(Tier tier) {
  switch (tier) {
    case Tier::kQ80: return {34, -1, -1, 2};
    case Tier::kQ40:
    case Tier::kIq4nl: return {18, -1, -1, 2};
    case Tier::kQ41: return {20, 2, -1, 4};
    case Tier::kQ50: return {22, -1, 2, 6};
    case Tier::kQ51: return {24, 2, 4, 8};
    default: return {0, -1, -1, -1};
  }
}

std::optional<Tier> block32_tier(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0: return Tier::kQ80;
    case GgmlType::kQ4_0: return Tier::kQ40;
    case GgmlType::kQ4_1: return Tier::kQ41;
    case GgmlType::kQ5_0: return Tier::kQ50;
    case GgmlType::kQ5_1: return Tier::kQ51;
    case GgmlType::kIQ4_NL: return Tier::kIq4nl;
    default: return std::nullopt;
  }
}

// One 32-weight block. The nibble bytes are already ork's group layout
// (weight j low, j + 16 high), and bit j of the 32-bit qh mask is weight
// j's fifth bit, as ork's bit plane keeps it: both are copied as they are.
void carry_block32(Tier tier, const uint8_t* b, uint8_t* codes, uint8_t* bits, uint8_t* header) {
  const Block32Source src = block32_source(tier);
  const CarriedLayout l = carried_layout(tier);
  std::memcpy(header, b, 2);
  if (src.m_at >= 0) std::memcpy(header + 2, b + src.m_at, 2);
  if (src.qh_at >= 0) std::memcpy(bits, b + src.qh_at, 4);
  std::memcpy(codes, b + src.qs_at, l.code_bits * 4);
}

}  // namespace

GgmlType carried_source(Tier tier) {
  switch (tier) {
    case Tier::kQ3k: return GgmlType::kQ3_K;
    case Tier::kQ2k: return GgmlType::kQ2_K;
    case Tier::kQ4k: return GgmlType::kQ4_K;
    case Tier::kQ5k: return GgmlType::kQ5_K;
    case Tier::kQ6k: return GgmlType::kQ6_K;
    case Tier::kQ80: return GgmlType::kQ8_0;
    case Tier::kQ40: return GgmlType::kQ4_0;
    case Tier::kQ41: return GgmlType::kQ4_1;
    case Tier::kQ50: return GgmlType::kQ5_0;
    case Tier::kQ51: return GgmlType::kQ5_1;
    case Tier::kIq4nl: return GgmlType::kIQ4_NL;
    case Tier::kIq4xs: return GgmlType::kIQ4_XS;
    default: return GgmlType::kF32;
  }
}

bool quantized_source(const GgufFile& gguf) {
  for (const GgufTensorInfo& t : gguf.tensors()) {
    if (t.dims.size() < 2) continue;
    if (t.type != GgmlType::kF32 && t.type != GgmlType::kF16 && t.type != GgmlType::kBF16) return true;
  }
  return false;
}

std::optional<Tier> carrier_tier(GgmlType type, int64_t k) {
  if (const std::optional<Tier> t = block32_tier(type)) {
    return k > 0 && k % 32 == 0 ? t : std::nullopt;
  }
  if (k <= 0 || k % kSuperBlock != 0) return std::nullopt;
  if (type == GgmlType::kQ4_K) return Tier::kQ4k;
  if (type == GgmlType::kQ6_K) return Tier::kQ6k;
  if (type == GgmlType::kQ5_K) return Tier::kQ5k;
  if (type == GgmlType::kIQ4_XS) return Tier::kIq4xs;
  if (type == GgmlType::kQ3_K) return Tier::kQ3k;
  if (type == GgmlType::kQ2_K) return Tier::kQ2k;
  return std::nullopt;
}

Status carry_rows(GgmlType type, const uint8_t* src, int64_t rows, int64_t k, uint8_t* data, float* scales) {
  const std::optional<Tier> tier = carrier_tier(type, k);
  if (!tier) {
    return error(StatusCode::kUnsupported, "no tier carries {} rows of {} weights", ggml_type_name(type), k);
  }
  // Every byte of `data` is written below (codes, high bits, headers): no
  // clearing first, which on fresh pages costs as much as the carrying.
  const int64_t blocks = k / kSuperBlock;
  const int64_t b0 = carried_code_bytes(*tier, k);
  uint8_t* plane1 = data + b0 * rows;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* codes = data + b0 * r;
    if (scales != nullptr) scales[r] = 1.0f;
    if (const SuperBlockSource sb = super_block_source(*tier); sb.carry != nullptr) {
      const CarriedLayout l = carried_layout(*tier);
      const uint8_t* row = src + r * blocks * sb.bytes;
      uint8_t* bits = plane1 + r * (k * l.high_bits / 8 + blocks * l.header_bytes);
      uint8_t* headers = bits + k * l.high_bits / 8;
      for (int64_t b = 0; b < blocks; ++b) {
        sb.carry(row + b * sb.bytes, codes + b * kSuperBlock * l.code_bits / 8, bits + b * kSuperBlock * l.high_bits / 8,
                 headers + b * l.header_bytes);
      }
    } else {
      const Block32Source bs = block32_source(*tier);
      const CarriedLayout l = carried_layout(*tier);
      const int64_t n = k / 32;
      const uint8_t* row = src + r * n * bs.bytes;
      uint8_t* bits = plane1 + r * (k * l.high_bits / 8 + n * l.header_bytes);
      uint8_t* headers = bits + k * l.high_bits / 8;
      for (int64_t b = 0; b < n; ++b) {
        carry_block32(*tier, row + b * bs.bytes, codes + b * l.code_bits * 4, bits + b * 4,
                      headers + b * l.header_bytes);
      }
    }
  }
  return Status::ok();
}

}  // namespace ork
