// The CPU engine's integer kernels, written once with Highway and compiled
// for every target (AVX-512, AVX2, SSE4, SSSE3, NEON, scalar); the best one
// this machine runs is chosen at each call. Each matches its scalar
// reference in kernels/ref/quant_matmul.h bit for bit.
#pragma once

#include <cstdint>

#include "kernels/quant_types.h"

namespace ork::cpu {

// Per-token int8 quantization of n rows of k floats (see ref::quantize_acts).
void quantize_acts(const float* x, int n, int64_t k, int8_t* q, float* scale, int32_t* sum);

// Rows [row_begin, row_end) of y = W a for every token of `a` (GEMV when
// a.n is 1, a register-blocked GEMM otherwise): y[t * ldy + r].
void quant_matmul(const QuantWeights& w, const QuantActs& a, float* y, int64_t ldy, int64_t row_begin,
                  int64_t row_end);

// Row r of w as w.k floats (the embedding lookup): ref::dequantize_codes_row.
void dequantize_row(const QuantWeights& w, int64_t r, float* out);

}  // namespace ork::cpu
