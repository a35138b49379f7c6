// The CPU engine's integer dot products, written once with Highway and
// compiled for every target (AVX2, AVX-512, NEON, ..., scalar); the best
// one the machine supports is chosen at the call (once per op, not per
// element). Each matches its scalar reference in kernels/ref/int8_dot.h
// exactly.
#pragma once

#include <cstdint>

namespace ork::cpu {

int32_t dot_i8(const int8_t* w, const int8_t* a, int64_t k);
int32_t dot_i4(const uint8_t* nibbles, const int8_t* a, int64_t k);

// Rows [begin, end) of a GEMV: y[r] = scales[r] * a_scale * dot(row r, a).
// `tier_bits` is 8 (int8 rows of k bytes) or 4 (nibble rows of k/2 bytes).
void gemv_rows(int tier_bits, const uint8_t* data, const float* scales, int64_t k, const int8_t* a, float a_scale,
               float* y, int64_t begin, int64_t end);

// Targets compiled into this binary that this machine can run (for tests),
// and a way to force one: -1 restores the best.
int compiled_target_count();
const char* target_name(int index);
void force_target(int index);

}  // namespace ork::cpu
