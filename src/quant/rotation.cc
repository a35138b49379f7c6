#include "quant/rotation.h"

#include <cmath>

namespace ork {
namespace {

bool sign_negative(uint64_t seed, int64_t j) {
  uint64_t z = seed + static_cast<uint64_t>(j) * 0x9E3779B97F4A7C15ull + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return ((z ^ (z >> 31)) & 1) != 0;
}

// In-place unnormalised Walsh-Hadamard transform of n values (n a power of 2).
void fwht(float* x, int n) {
  for (int h = 1; h < n; h *= 2) {
    for (int i = 0; i < n; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
}

}  // namespace

int rotation_block(int64_t k_stored) {
  if (k_stored <= 0) return 0;
  int64_t b = k_stored & -k_stored;
  return static_cast<int>(b > 4096 ? 4096 : b);
}

void rotate(float* x, int64_t k, int block, uint64_t seed) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(block));
  for (int64_t j = 0; j < k; ++j) {
    if (sign_negative(seed, j)) x[j] = -x[j];
  }
  for (int64_t b = 0; b < k; b += block) {
    fwht(x + b, block);
    for (int64_t j = b; j < b + block; ++j) x[j] *= norm;
  }
}

void rotation_signs(int64_t k, uint64_t seed, float* out) {
  for (int64_t j = 0; j < k; ++j) out[j] = sign_negative(seed, j) ? -1.0f : 1.0f;
}

void unrotate(float* x, int64_t k, int block, uint64_t seed) {
  // The normalised Hadamard matrix is symmetric and its own inverse.
  const float norm = 1.0f / std::sqrt(static_cast<float>(block));
  for (int64_t b = 0; b < k; b += block) {
    fwht(x + b, block);
    for (int64_t j = b; j < b + block; ++j) x[j] *= norm;
  }
  for (int64_t j = 0; j < k; ++j) {
    if (sign_negative(seed, j)) x[j] = -x[j];
  }
}

}  // namespace ork
