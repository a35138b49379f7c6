// A weight matrix as stored, the one description every layer shares: the
// model binds its tensors as WeightViews, the dispatcher routes them and
// the kernels read them.
#pragma once

#include <cstdint>

#include "format/gguf/ggml_type.h"
#include "quant/tier.h"

namespace ork {

// `rows` output channels of `cols` inputs each (GGUF ne0 = cols, ne1 =
// rows), either in a GGUF type (`row_bytes` per row) or, when `is_tier` is
// set, in an orkpack tier: rows padded to `k_stored`, one scale per row,
// and rotated along K when `rotation_block` > 0.
struct WeightView {
  GgmlType type = GgmlType::kF32;
  const char* name = nullptr;  // the tensor's name, for observers and errors
  const uint8_t* data = nullptr;
  int64_t cols = 0;
  int64_t rows = 0;
  uint64_t row_bytes = 0;

  bool is_tier = false;
  Tier tier = Tier::kF32;
  const float* scales = nullptr;
  int64_t k_stored = 0;
  int rotation_block = 0;
  uint64_t rotation_seed = 0;

  TierTensor tier_tensor() const { return {tier, data, scales, rows, k_stored}; }
  // A tier tensor's view, unrotated, whose inputs are k_stored wide.
  static WeightView of_tier(const TierTensor& t) {
    WeightView w;
    w.data = t.data;
    w.cols = t.k_stored;
    w.rows = t.rows;
    w.is_tier = true;
    w.tier = t.tier;
    w.scales = t.scales;
    w.k_stored = t.k_stored;
    return w;
  }
  // K as the kernels read it: padded for a tier, as stored for GGUF.
  int64_t k() const { return is_tier ? k_stored : cols; }
};

// Row r of W as the model sees it (cols floats: unpadded, unrotated), by the
// reference dequantizers. Uses thread-local scratch.
void dequantize_row(const WeightView& w, int64_t r, float* out);

// Bytes of a stored matrix (planes and scales, or the GGUF rows).
uint64_t matrix_bytes(const WeightView& w);

}  // namespace ork
