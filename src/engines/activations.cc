#include "engines/activations.h"

#include <algorithm>

#include "kernels/cpu/float_ops.h"
#include "kernels/cpu/quant_matmul.h"
#include "quant/rotation.h"

namespace ork {

const float* RotationSigns::get(int64_t k, uint64_t seed) {
  for (const Table& t : tables_) {
    if (t.k == k && t.seed == seed) return t.signs.data();
  }
  Table& t = tables_.emplace_back();
  t.k = k;
  t.seed = seed;
  t.signs.resize(static_cast<size_t>(k));
  rotation_signs(k, seed, t.signs.data());
  return t.signs.data();
}

void pad_rotate_quantize(const float* x, int64_t n, int64_t cols, int64_t x_stride, int64_t k, int block,
                         const float* signs, float* f32, int8_t* q, float* scales, int32_t* sums) {
  for (int64_t m = 0; m < n; ++m) {
    float* row = f32 + m * k;
    std::copy_n(x + m * x_stride, cols, row);
    std::fill(row + cols, row + k, 0.0f);
    if (signs != nullptr) cpu::rotate(row, k, block, signs);
  }
  if (q != nullptr) cpu::quantize_acts(f32, static_cast<int>(n), k, q, scales, sums);
}

}  // namespace ork
