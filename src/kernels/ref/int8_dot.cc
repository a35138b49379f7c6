#include "kernels/ref/int8_dot.h"

#include <algorithm>
#include <cmath>

namespace ork::ref {

float quantize_activation_int8(const float* x, int64_t k, int8_t* q) {
  float amax = 0.0f;
  for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0.0f) {
    std::fill(q, q + k, int8_t{0});
    return 0.0f;
  }
  const float inv = 127.0f / amax;
  for (int64_t i = 0; i < k; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] * inv));
  return amax / 127.0f;
}

int32_t dot_i8(const int8_t* w, const int8_t* a, int64_t k) {
  int32_t sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += static_cast<int32_t>(w[i]) * a[i];
  return sum;
}

int32_t dot_i4(const uint8_t* nibbles, const int8_t* a, int64_t k) {
  int32_t sum = 0;
  for (int64_t g = 0; g < k / 32; ++g) {
    for (int j = 0; j < 16; ++j) {
      const uint8_t b = nibbles[g * 16 + j];
      sum += ((b & 0x0F) - 8) * a[g * 32 + j];
      sum += ((b >> 4) - 8) * a[g * 32 + j + 16];
    }
  }
  return sum;
}

}  // namespace ork::ref
