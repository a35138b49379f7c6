// orkpack precision tiers (docs/FORMAT.md): what each stores, how many bits,
// and the reference quantizer and dequantizer of each. Every quantized tier
// has one f32 scale per output row.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ork {

enum class Tier : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kI8 = 2,
  kI4 = 3,
  kNf4 = 4,
  kI5 = 5,
  kI6 = 6,
  kI8s = 7,
  kBf16 = 8,
  kQ4k = 9,  // a Q4_K source's blocks, carried (quant/carry.h); CPU only
  kQ6k = 10, // a Q6_K source's blocks, carried; CPU only
  kQ5k = 11, // a Q5_K source's blocks, carried; CPU only
  kQ80 = 12, // a Q8_0 source's blocks, carried; CPU only
  kQ40 = 13, // Q4_0, carried; CPU only
  kQ41 = 14, // Q4_1, carried; CPU only
  kQ50 = 15, // Q5_0, carried; CPU only
  kQ51 = 16, // Q5_1, carried; CPU only
  kIq4nl = 17, // IQ4_NL, carried; CPU only
  kIq4xs = 18, // IQ4_XS, carried; CPU only
  kQ3k = 19,  // Q3_K, carried; CPU only
  kQ2k = 20,  // Q2_K, carried; CPU only
};
inline constexpr uint32_t kTierCount = 21;

struct TierInfo {
  Tier tier;
  std::string_view name;
  int bits;          // per weight, excluding the per-row scale
  bool has_scales;   // per-channel tiers carry one f32 scale per row (the carried tiers: in their blocks)
};

const TierInfo& tier_info(Tier tier);
std::optional<Tier> tier_from_id(uint32_t id);
std::optional<Tier> tier_from_name(std::string_view name);
std::string_view tier_name(Tier tier);
// Every tier's name, space-separated, in id order (for messages and help).
std::string tier_names();

// f32, f16 and bf16: plain values, no codes and no scales (the float matmul
// reads them; the integer kernels and engines do not).
inline bool float_tier(Tier tier) { return tier == Tier::kF32 || tier == Tier::kF16 || tier == Tier::kBf16; }

// The carried tiers: block-scaled tiers that only carry a GGUF quant's own
// codes and scales (quant/carry.h); nothing is quantized into them from
// floats, and their rows are whole blocks (k_stored % 256 == 0 for the
// K-quants, % 32 for the rest).
inline bool carried_tier(Tier tier) { return static_cast<uint32_t>(tier) >= static_cast<uint32_t>(Tier::kQ4k); }

// A carried tier's row: plane 0 holds the codes - a nibble plane as i4's
// (the low four bits), int8 bytes as i8's (q80), or q3k's 2-bit plane
// (below) - and plane 1 the high bits (a bit plane as i5's, or a 2-bit
// plane as i6's) followed by one header per block:
//   q4k, q5k      256  f16 d, f16 dmin, uint8 sc[8], uint8 m[8]  (sc, m < 64)
//   q6k           256  f16 d, int8 sc[16]
//   q3k           256  f16 d, int8 sc[16]                         (sc in -32..31)
//   q2k           256  f16 d, f16 dmin, uint8 sm[16]              (sc = low nibble, m = high)
//   iq4xs         256  f16 d, int8 sc[8]                          (sc in -32..31)
//   q80, q40, q50  32  f16 d
//   q41, q51       32  f16 d, f16 m
//   iq4nl          32  f16 d
// Codes are stored unsigned as the source's are (q4k 0..15, q5k 0..31,
// q6k 0..63, q3k 0..7, q2k 0..3, q40 0..15, q50 0..31, iq4nl and iq4xs a codebook
// index), q80 as int8. q3k's low two bits (q2k's codes) are laid out for the SIMD
// kernels' steps: each 64 weights (two groups g, g + 1) take 16 bytes, and
// bits 2s, 2s + 1 of byte j hold weight j of group g (s = 0), j of g + 1
// (s = 1), 16 + j of g (s = 2) and 16 + j of g + 1 (s = 3); its third bit is
// in the bit plane.
struct CarriedLayout {
  int64_t block = 0;         // weights per header
  int64_t header_bytes = 0;  // per block
  int high_bits = 0;         // in plane 1, above plane 0's: 0, 1 or 2
  int code_bits = 4;         // per weight in plane 0: 4, 8 (q80) or 2 (q3k, q2k)
};
inline constexpr int64_t kSuperBlock = 256;
inline constexpr int64_t kQ4kHeaderBytes = 20;
inline constexpr int64_t kQ6kHeaderBytes = 18;
inline constexpr int64_t kIq4xsHeaderBytes = 10;
inline constexpr int64_t kQ2kHeaderBytes = 20;
// Inline: the kernels ask for it per tile.
inline constexpr CarriedLayout carried_layout(Tier tier) {
  switch (tier) {
    case Tier::kQ4k: return {kSuperBlock, kQ4kHeaderBytes, 0, 4};
    case Tier::kQ5k: return {kSuperBlock, kQ4kHeaderBytes, 1, 4};
    case Tier::kQ6k: return {kSuperBlock, kQ6kHeaderBytes, 2, 4};
    case Tier::kQ3k: return {kSuperBlock, kQ6kHeaderBytes, 1, 2};
    case Tier::kQ2k: return {kSuperBlock, kQ2kHeaderBytes, 0, 2};
    case Tier::kIq4xs: return {kSuperBlock, kIq4xsHeaderBytes, 0, 4};
    case Tier::kQ80: return {32, 2, 0, 8};
    case Tier::kQ40:
    case Tier::kIq4nl: return {32, 2, 0, 4};
    case Tier::kQ41: return {32, 4, 0, 4};
    case Tier::kQ50: return {32, 2, 1, 4};
    case Tier::kQ51: return {32, 4, 1, 4};
    default: return {};
  }
}
// The block a carried tier's header covers.
inline int64_t carried_block(Tier tier) { return carried_layout(tier).block; }
// Bytes of a carried row's plane 0.
inline int64_t carried_code_bytes(Tier tier, int64_t k) { return k * carried_layout(tier).code_bits / 8; }
// Where a carried row's headers start within its plane-1 bytes.
inline int64_t carried_headers_offset(Tier tier, int64_t k) { return k * carried_layout(tier).high_bits / 8; }

// Rows are stored padded with zeros to a multiple of this many weights.
inline constexpr int64_t kTierGroup = 32;
inline int64_t tier_stored_k(int64_t k) { return (k + kTierGroup - 1) / kTierGroup * kTierGroup; }

// Bytes of all planes of `rows` rows of `k_stored` weights (scales excluded).
uint64_t tier_data_bytes(Tier tier, int64_t rows, int64_t k_stored);

// A stored tensor: its planes and its per-row scales (null for float tiers).
struct TierTensor {
  Tier tier = Tier::kF32;
  const uint8_t* data = nullptr;
  const float* scales = nullptr;
  int64_t rows = 0;
  int64_t k_stored = 0;
};

// Quantizes `rows` rows of `k_stored` floats (not into a carried tier) (already padded, and rotated if
// the tensor is) into `data` (tier_data_bytes) and `scales` (rows floats;
// unused for float tiers). `importance` holds one non-negative weight per
// column, or is null for uniform: the scale of each row minimises
// sum_j importance_j (w_j - w'_j)^2 by search. Returns that summed error.
//
// `gptq`, if given, is gptq_factor's R (upper, H = R R^T; k_stored x
// k_stored, row-major; H = E[x x^T] in the stored basis, damped): then each
// row is rounded one weight at a time, and each rounding error is pushed
// onto the weights not yet rounded so that the layer's output error
// E|(W - W')x|^2, not the weights' own error, is what stays small
// (GPTQ, Frantar et al. 2022). The row scales are still searched first.
double quantize_tier(Tier tier, const float* w, const float* importance, int64_t rows, int64_t k_stored, uint8_t* data,
                     float* scales, const double* gptq = nullptr);

// Reference dequantization of row r (k_stored floats).
void dequantize_tier_row(const TierTensor& t, int64_t r, float* out);

// nf4's 16 levels (NormalFloat quantiles, in units of the row scale).
const std::array<float, 16>& nf4_codebook();

// i8s only: row r as the CPU's critical path reads it — the high plane alone,
// an i4-range code with the tensor's scale.
void dequantize_i8s_high_row(const TierTensor& t, int64_t r, float* out);

}  // namespace ork
