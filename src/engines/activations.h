// Bringing a matmul's input into its weight's stored basis, as every engine
// must before its datapath sees it: padded with zeros from cols to the
// stored K, rotated when the weight was rotated at pack time, and for the
// integer datapaths quantized per token to int8 (scale and code sum).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

namespace ork {

// The rotation's random signs for each (K, seed) a model uses (a handful),
// made once. Addresses are stable. Not thread-safe: look up before a
// parallel section.
class RotationSigns {
 public:
  const float* get(int64_t k, uint64_t seed);

 private:
  struct Table {
    int64_t k = 0;
    uint64_t seed = 0;
    std::vector<float> signs;
  };
  std::deque<Table> tables_;
};

// Rows [0, n) of x (`cols` floats each, row stride x_stride) padded with
// zeros to k into f32 (row stride k), rotated when `signs` is given (in
// blocks of `block`), then quantized per row into q, scales and sums
// unless q is null. On the SIMD kernels.
void pad_rotate_quantize(const float* x, int64_t n, int64_t cols, int64_t x_stride, int64_t k, int block,
                         const float* signs, float* f32, int8_t* q, float* scales, int32_t* sums);
inline void pad_rotate_quantize(const float* x, int64_t n, int64_t cols, int64_t k, int block, const float* signs,
                                float* f32, int8_t* q, float* scales, int32_t* sums) {
  pad_rotate_quantize(x, n, cols, cols, k, block, signs, f32, q, scales, sums);
}

}  // namespace ork
