// Scalar references of the CPU engine's integer kernels (kernels/cpu):
// activation quantization and the quantized matmul. Integer-exact, so every
// SIMD target must match them bit for bit - except the block kinds (q4k,
// the carried tiers), whose super-blocks are summed in float: there the targets agree to
// float rounding (kernels/quant_types.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant_types.h"

namespace ork::ref {

// Per token: q = round(x / s) (ties to even), s = max|x| / 127 (0 for an
// all-zero row), sum = sum of q. x is n rows of k floats.
// max_code 127 is the CPU's int8; the NPU's W4A4 datapath uses 7 (codes in
// [-7, 7]): s = max|x| / max_code.
void quantize_acts(const float* x, int n, int64_t k, int8_t* q, float* scale, int32_t* sum, int max_code = 127);

// The integer code of weight j of row r (see kernels/quant_types.h; for
// q4k, q5k, q41 and q51 the unsigned code, for q6k, q40 and q50 the code
// less its offset, for iq4nl the codebook's level).
int32_t weight_code(const QuantWeights& w, int64_t r, int64_t j);

// Row r of w as floats, the kernels' own view of it (an embedding lookup):
// out[j] = (scales[r] * scale_mul) * weight_code(w, r, j), for j < w.k.
// For i4, i5, i6, i8 and i8s that is the tier's dequantized weight
// exactly; nf4 reads its int8 codebook (within 0.5/127 of the float one).
void dequantize_codes_row(const QuantWeights& w, int64_t r, float* out);

// The block kinds' and i8's activations: per token, act_block()-sized blocks of
// int8 codes with one scale each - requantized from a.f32 if given, else
// a.q with the token's scale for every block.
void block_acts(const QuantActs& a, int64_t block, std::vector<int8_t>& q, std::vector<float>& scale);

// y[t * ldy + r] for t < a.n and r in [row_begin, row_end), as in
// kernels/quant_types.h: the float product is
// (scales[r] * scale_mul) * act_scale[t] * float(dot), in that order - but
// for i8 given a.f32: (scales[r] * scale_mul) * (sum over blocks of
// act_scale * float(dot)), the activations requantized per 32.
void quant_matmul(const QuantWeights& w, const QuantActs& a, float* y, int64_t ldy, int64_t row_begin,
                  int64_t row_end);

}  // namespace ork::ref
