// Per-tier quantizers and dequantizers behind quant/tier.h (one file each).
// Each quantizes one row of k weights into its planes (row pointers given)
// and returns the row's weighted error; dequantizers read one row. With
// given_scale > 0 the row is coded on that scale instead of a searched one
// (the returned error is then not meaningful: callers measure it).
#pragma once

#include <cstdint>

#include "quant/tier.h"

namespace ork::tiers {

// Row pointers into each plane of a tier, for one row.
struct RowPlanes {
  uint8_t* p0 = nullptr;  // first plane (codes / nibbles / floats)
  uint8_t* p1 = nullptr;  // second plane (bit plane, residual nibbles), if any
};
struct ConstRowPlanes {
  const uint8_t* p0 = nullptr;
  const uint8_t* p1 = nullptr;
};

double quantize_i8_row(const float* w, const float* imp, int64_t k, RowPlanes out, float* scale, float given_scale = 0.0f);
void dequantize_i8_row(ConstRowPlanes in, float scale, int64_t k, float* out);

double quantize_i4_row(const float* w, const float* imp, int64_t k, RowPlanes out, float* scale, float given_scale = 0.0f);
void dequantize_i4_row(ConstRowPlanes in, float scale, int64_t k, float* out);

double quantize_nf4_row(const float* w, const float* imp, int64_t k, RowPlanes out, float* scale, float given_scale = 0.0f);
void dequantize_nf4_row(ConstRowPlanes in, float scale, int64_t k, float* out);

// i5 (extra_bits 1) and i6 (extra_bits 2): a nibble plane plus a narrow plane.
double quantize_wide_row(int extra_bits, const float* w, const float* imp, int64_t k, RowPlanes out, float* scale, float given_scale = 0.0f);
void dequantize_wide_row(int extra_bits, ConstRowPlanes in, float scale, int64_t k, float* out);

double quantize_i8s_row(const float* w, const float* imp, int64_t k, RowPlanes out, float* scale, float given_scale = 0.0f);
void dequantize_i8s_row(ConstRowPlanes in, float scale, int64_t k, float* out);
void dequantize_i8s_high_row(ConstRowPlanes in, float scale, int64_t k, float* out);

// The carried tiers (quant/tier.h): row r as llama.cpp dequantizes the
// carried source row, times the row scale (1), operation for operation.
void dequantize_q4k_row(ConstRowPlanes in, float scale, int64_t k, float* out);
void dequantize_q5k_row(ConstRowPlanes in, float scale, int64_t k, float* out);
void dequantize_q6k_row(ConstRowPlanes in, float scale, int64_t k, float* out);
void dequantize_iq4xs_row(ConstRowPlanes in, float scale, int64_t k, float* out);
void dequantize_q3k_row(ConstRowPlanes in, float scale, int64_t k, float* out);
void dequantize_q2k_row(ConstRowPlanes in, float scale, int64_t k, float* out);
// q80, q40, q41, q50, q51, iq4nl: one f16 d (and m) per 32 weights.
void dequantize_block32_row(Tier tier, ConstRowPlanes in, float scale, int64_t k, float* out);

}  // namespace ork::tiers

namespace ork::tiers {
// The representable value nearest x, in units of the row scale (for
// error-correcting rounding, which codes one weight at a time).
float snap_i8(float x);
float snap_i4(float x);
float snap_nf4(float x);
float snap_wide(int extra_bits, float x);
float snap_i8s(float x);
}  // namespace ork::tiers
