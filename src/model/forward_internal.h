// What forward.cc and forward_moe.cc share beside the Context itself.
#pragma once

#include <cstdint>

#include "kernels/ref/ops.h"

namespace ork {

// An orkpack tier the integer kernels read (not a float tier).
bool integer_tier(const WeightView& w);

// Rows [0, n) of x (`cols` wide) padded with zeros to k into f32, rotated
// when `signs` is given (block `block`), then quantized per row into q,
// scales and sums unless q is null: how every quantized matmul's input is
// made.
void pad_rotate_quantize(const float* x, int64_t n, int64_t cols, int64_t k, int block, const float* signs, float* f32,
                         int8_t* q, float* scales, int32_t* sums);

}  // namespace ork
