// What the kernel tests that run every compiled SIMD target share: a
// fixture that puts the best target back after each test, and inputs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/targets.h"

namespace ork::testing {

// Tests force each target in turn (cpu::force_target); this undoes it.
class EveryTargetTest : public ::testing::Test {
 protected:
  void TearDown() override { cpu::force_target(-1); }
};

// n normally distributed floats (a fixed seed: the same every run).
inline std::vector<float> normal_vector(int64_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal(rng);
  return v;
}

}  // namespace ork::testing
