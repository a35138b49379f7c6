// Scalar references of the CPU engine's integer kernels: per-token int8
// activation quantization and int8 / packed-int4 dot products (exact
// integer results, so every SIMD target must match them bit for bit).
#pragma once

#include <cstdint>

namespace ork::ref {

// q[i] = round(x[i] / s), s = max|x| / 127 (0 for an all-zero x). Returns s.
float quantize_activation_int8(const float* x, int64_t k, int8_t* q);

// sum_i w[i] * a[i].
int32_t dot_i8(const int8_t* w, const int8_t* a, int64_t k);

// A row of orkpack's nibble plane (groups of 32 weights in 16 bytes, code
// u = q + 8 in the low nibble for weight j, high nibble for j + 16) dotted
// with int8 activations: sum_i (u_i - 8) * a[i]. k is a multiple of 32.
int32_t dot_i4(const uint8_t* nibbles, const int8_t* a, int64_t k);

}  // namespace ork::ref
