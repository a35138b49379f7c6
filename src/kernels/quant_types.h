// How the integer kernels (scalar reference and SIMD) see an orkpack tier
// tensor and a batch of int8 activations. Every code is an integer, so the
// reference and every SIMD target agree bit for bit:
//
//   y[t][r] = (scales[r] * scale_mul) * act_scale[t] * sum_j code(r, j) * a[t][j]
//
// where code(r, j) is, per kind (planes as in docs/FORMAT.md):
//   kI4    nibble - 8                     (i4, and the i8s high plane alone)
//   kNf4   kNf4Codes[nibble]              (NormalFloat levels * 127, rounded)
//   kI5    (nibble | bit << 4) - 16
//   kI6    (nibble | 2 bits << 4) - 32
//   kI8    the int8 byte
//
// except i8 given the activations' floats (QuantActs::f32): its int8 weights
// round finer than one activation scale per token can, so it quantizes them
// per 32 as q8_0 does and
//
//   y[t][r] = (scales[r] * scale_mul) * sum over blocks b of act_scale[t][b] * dot_b
//
// (integer within a block, float across: the targets agree to rounding).
//   kI8s   int8(((high << 4) | low) ^ 0x80) - 8  =  16 (high - 8) + (low - 8)
//
// The block kinds carry a llama.cpp quant's codes and scales exactly
// (quant/carry.h): rows are blocks - super-blocks of 256 weights for the
// K-quants, each with its own f16 scale d (q4k, q5k: and dmin) and every 32
// (q4k, q5k) or 16 (q6k) weights a small integer sub-scale; 32 weights for
// the others, each with its f16 d (q41, q51: and m). There is no row scale:
//
//   kQ4k   w = d * sc[j / 32] * nibble - dmin * m[j / 32]
//   kQ5k   w = d * sc[j / 32] * five-bit code - dmin * m[j / 32]
//   kQ6k   w = d * sc[j / 16] * (six-bit code - 32)
//   kQ3k   w = d * sc[j / 16] * (three-bit code - 4)
//   kQ2k   w = d * sc[j / 16] * two-bit code - dmin * m[j / 16]   (sc, m nibbles)
//   kQ80   w = d * int8 code                  (d per 32 weights, as below)
//   kQ40   w = d * (nibble - 8)
//   kQ41   w = d * nibble + m
//   kQ50   w = d * (five-bit code - 16)
//   kQ51   w = d * five-bit code + m
//   kIq4nl w = d * kIq4nlValues[nibble]
//   kIq4xs w = d * sc[j / 32] * kIq4nlValues[nibble]   (super-blocks of 256)
//
// so y[t][r] = act_scale[t] * sum over blocks of
// (d * sum_sub sc * dot_sub - dmin * sum_sub m * act_sum_sub): integer
// within a block, float across them (the SIMD kernels add those floats in
// another order, so they agree with the reference to rounding, not bit for
// bit).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "quant/tier.h"

namespace ork {

enum class CodeKind { kI4, kNf4, kI5, kI6, kI8, kI8s, kQ4k, kQ6k, kQ5k, kQ80, kQ40, kQ41, kQ50, kQ51, kIq4nl, kIq4xs, kQ3k, kQ2k };

// The block kinds: the carried tiers (quant/tier.h), one kind each.
inline bool block_kind(CodeKind kind) { return static_cast<int>(kind) >= static_cast<int>(CodeKind::kQ4k); }
inline Tier block_tier(CodeKind kind) {
  switch (kind) {
    case CodeKind::kQ4k: return Tier::kQ4k;
    case CodeKind::kQ5k: return Tier::kQ5k;
    case CodeKind::kQ6k: return Tier::kQ6k;
    case CodeKind::kQ80: return Tier::kQ80;
    case CodeKind::kQ40: return Tier::kQ40;
    case CodeKind::kQ41: return Tier::kQ41;
    case CodeKind::kQ50: return Tier::kQ50;
    case CodeKind::kQ51: return Tier::kQ51;
    case CodeKind::kIq4nl: return Tier::kIq4nl;
    case CodeKind::kIq4xs: return Tier::kIq4xs;
    case CodeKind::kQ3k: return Tier::kQ3k;
    case CodeKind::kQ2k: return Tier::kQ2k;
    default: return Tier::kF32;
  }
}
// 32-weight blocks with an f16 d (and m) each, as against the K-quants'
// super-blocks of 256.
// A kind's name: its tier's (quant/tier.h), as `ork inspect` shows tiers.
inline std::string_view code_kind_name(CodeKind kind) {
  switch (kind) {
    case CodeKind::kI4: return "i4";
    case CodeKind::kNf4: return "nf4";
    case CodeKind::kI5: return "i5";
    case CodeKind::kI6: return "i6";
    case CodeKind::kI8: return "i8";
    case CodeKind::kI8s: return "i8s";
    default: return tier_name(block_tier(kind));
  }
}
inline bool block32_kind(CodeKind kind) { return block_kind(kind) && carried_block(block_tier(kind)) == 32; }

// The NF4 codebook as int8: round(127 * level). Reading nf4 through these
// codes (and scale_mul 1/127) moves each level by at most 0.5/127 of the
// row's scale, far inside nf4's own rounding step (>= 0.08).
inline constexpr std::array<int8_t, 16> kNf4Codes = {-127, -88, -67, -50, -36, -23, -12, 0,
                                                     10,   20,  31,  43,  56,  71,  92,  127};

struct QuantWeights {
  CodeKind kind = CodeKind::kI4;
  const uint8_t* p0 = nullptr;  // first plane of row 0 (nibbles or int8 bytes)
  const uint8_t* p1 = nullptr;  // second plane of row 0 (bits or low nibbles), if any
  const float* scales = nullptr;  // per row (none for the block kinds)
  float scale_mul = 1.0f;
  int64_t rows = 0;
  int64_t k = 0;  // stored K, a multiple of 32
};

// Bytes per row of each plane of a kind (the block kinds' layouts:
// quant/tier.h, CarriedLayout).
inline int64_t plane0_row_bytes(CodeKind kind, int64_t k) {
  if (block_kind(kind)) return carried_code_bytes(block_tier(kind), k);
  return kind == CodeKind::kI8 ? k : k / 2;
}
inline int64_t plane1_row_bytes(CodeKind kind, int64_t k) {
  switch (kind) {
    case CodeKind::kI5: return k / 8;
    case CodeKind::kI6: return k / 4;
    case CodeKind::kI8s: return k / 2;
    default: {
      if (!block_kind(kind)) return 0;
      const CarriedLayout l = carried_layout(block_tier(kind));
      return k * l.high_bits / 8 + k / l.block * l.header_bytes;
    }
  }
}
// Where a block kind's headers start within a row's plane 1.
inline int64_t block_headers_offset(CodeKind kind, int64_t k) { return carried_headers_offset(block_tier(kind), k); }

// The kernel view of a stored tier tensor (quantized tiers only).
// `i8s_high_only` reads an i8s tensor as its high plane (the CPU's fast
// path); otherwise both planes are read as int8 codes.
QuantWeights quant_weights(const TierTensor& t, bool i8s_high_only = false);

// n tokens of int8 activations, row stride k, one scale and code sum each
// (the sum lets unsigned-code kernels remove their offset once per row).
struct QuantActs {
  const int8_t* q = nullptr;
  const float* scale = nullptr;
  const int32_t* sum = nullptr;
  int64_t k = 0;
  int n = 0;
  // The floats q was quantized from (row stride k), where the caller keeps
  // them: the block kinds and i8 then quantize them per block instead - 256
  // for the K-quants, 32 for the rest, as llama.cpp's q8_K and q8_0 do - which
  // loses less than one scale per token. Null: every block takes the token's
  // scale (and i8 sums in int32 over the whole row, bit for bit everywhere).
  const float* f32 = nullptr;
};

// The activation block each block kind quantizes its input in: its own;
// i8's is 32.
inline int64_t act_block(CodeKind kind) { return kind == CodeKind::kI8 ? 32 : carried_block(block_tier(kind)); }

}  // namespace ork
