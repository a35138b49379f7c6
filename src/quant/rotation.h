// The randomized block Walsh-Hadamard rotation along K (docs/FORMAT.md):
// H = blockdiag(Had_b / sqrt(b)) * diag(random signs). H is orthogonal, so
// W x = (W H^T)(H x): rows of W are stored rotated and activations are
// rotated online by the same H. Rotation spreads outlier columns over the
// block, which is what makes per-channel 4-bit codes workable.
#pragma once

#include <cstdint>

namespace ork {

// Largest power of two dividing k_stored, capped at 4096 (0 if k_stored is 0).
int rotation_block(int64_t k_stored);

// x <- H x for one vector of k values (k a multiple of `block`). O(k log block).
void rotate(float* x, int64_t k, int block, uint64_t seed);

// The diagonal of random signs of H for k values: +1.0f or -1.0f each
// (what the SIMD rotation multiplies by).
void rotation_signs(int64_t k, uint64_t seed, float* out);

// x <- H^T x: undoes rotate().
void unrotate(float* x, int64_t k, int block, uint64_t seed);

// The default seed ork pack records.
inline constexpr uint64_t kDefaultRotationSeed = 0x6f726b2d726f7431ull;  // "ork-rot1"

}  // namespace ork
