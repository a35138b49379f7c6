// Test helper: a random weight stored at a tier, of `cols` (odd) columns
// padded to the tier's stored K, for the engine and dispatcher harnesses.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "quant/tier.h"
#include "quant/weight_view.h"

namespace ork::testing {

struct RandomWeight {
  Tier tier = Tier::kI8;
  int64_t rows = 0, cols = 0, k = 0;
  std::vector<uint8_t> data;
  std::vector<float> scales;
  TierTensor view() const { return {tier, data.data(), scales.data(), rows, k}; }
  // The model's view: inputs `cols` wide, padded by the engines.
  WeightView weight() const {
    WeightView w = WeightView::of_tier(view());
    w.cols = cols;
    return w;
  }
};

inline RandomWeight random_weight(Tier tier, int64_t rows, int64_t cols, uint32_t seed) {
  RandomWeight w;
  w.tier = tier;
  w.rows = rows;
  w.cols = cols;
  w.k = tier_stored_k(cols);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> f(static_cast<size_t>(rows * w.k), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) f[static_cast<size_t>(r * w.k + j)] = normal(rng);
  }
  w.data.resize(tier_data_bytes(tier, rows, w.k));
  w.scales.resize(static_cast<size_t>(rows));
  quantize_tier(tier, f.data(), nullptr, rows, w.k, w.data.data(), w.scales.data());
  return w;
}

// Float rounding of a matmul against its reference where blocks are summed
// in another order (the CPU's i8, the carried blocks): 1e-5 of the largest
// output.
inline float rounding_of(const std::vector<float>& want) {
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  return 1e-5f * scale;
}

}  // namespace ork::testing
