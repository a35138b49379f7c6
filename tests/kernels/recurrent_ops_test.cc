// Every compiled SIMD target of the recurrent token mixers against the
// scalar references: the short convolution sums its taps in f32 with fused
// multiply-adds where the reference sums in double, so it is held to a
// relative 1e-6 of sum |w u| (at most 64 taps); and a batch must equal its
// tokens one at a time, bit for bit, on every target.
#include "kernels/cpu/recurrent_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/targets.h"
#include "kernels/ref/ops.h"

namespace ork {
namespace {

class RecurrentEveryTarget : public ::testing::Test {
 protected:
  void TearDown() override { cpu::force_target(-1); }
};

std::vector<float> normal_vector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

TEST_F(RecurrentEveryTarget, ShortConvMatchesReference) {
  for (int width : {1, 7, 16, 33, 256}) {
    for (int taps : {2, 3, 4}) {
      for (int n : {1, 2, 5}) {
        const auto W = static_cast<size_t>(width);
        const auto bcx = normal_vector(static_cast<size_t>(n) * 3 * W, 1);
        const auto w = normal_vector(static_cast<size_t>(taps) * W, 2);
        const auto history = normal_vector(static_cast<size_t>(taps - 1) * W, 3);
        std::vector<float> want_u(static_cast<size_t>(n) * W), want(static_cast<size_t>(n) * W);
        ref::short_conv(bcx.data(), n, width, w.data(), taps, history.data(), want_u.data(), want.data());
        for (int target = 0; target < cpu::compiled_target_count(); ++target) {
          cpu::force_target(target);
          std::vector<float> u(want_u.size()), out(want.size());
          cpu::short_conv(bcx.data(), n, width, w.data(), taps, history.data(), u.data(), out.data());
          EXPECT_EQ(u, want_u) << cpu::target_name(target);  // one product each
          for (int t = 0; t < n; ++t) {
            for (size_t j = 0; j < W; ++j) {
              // sum |w u| over the taps, times |C|: the scale of the rounding.
              double mag = 0.0;
              for (int i = 0; i < taps; ++i) {
                const int src = t - (taps - 1) + i;
                const float x = src >= 0 ? want_u[static_cast<size_t>(src) * W + j]
                                         : history[static_cast<size_t>(taps - 1 + src) * W + j];
                mag += std::fabs(static_cast<double>(w[static_cast<size_t>(i) * W + j]) * x);
              }
              mag *= std::fabs(bcx[static_cast<size_t>(t) * 3 * W + W + j]);
              const size_t at = static_cast<size_t>(t) * W + j;
              EXPECT_NEAR(out[at], want[at], 1e-6 * mag + 1e-30)
                  << cpu::target_name(target) << " width " << width << " taps " << taps << " t " << t << " j " << j;
            }
          }
        }
      }
    }
  }
}

// Token by token, each step's history the last taps - 1 inputs: the same
// bits as the whole batch, on every target.
TEST_F(RecurrentEveryTarget, ShortConvBatchEqualsStepByStep) {
  const int width = 40, taps = 3, n = 9;
  const auto W = static_cast<size_t>(width);
  const auto bcx = normal_vector(static_cast<size_t>(n) * 3 * W, 4);
  const auto w = normal_vector(static_cast<size_t>(taps) * W, 5);
  for (int target = 0; target < cpu::compiled_target_count(); ++target) {
    cpu::force_target(target);
    std::vector<float> zeros(static_cast<size_t>(taps - 1) * W, 0.0f);
    std::vector<float> u(static_cast<size_t>(n) * W), batch(static_cast<size_t>(n) * W);
    cpu::short_conv(bcx.data(), n, width, w.data(), taps, zeros.data(), u.data(), batch.data());
    std::vector<float> history = zeros, step_u(W), step(W), steps;
    for (int t = 0; t < n; ++t) {
      cpu::short_conv(&bcx[static_cast<size_t>(t) * 3 * W], 1, width, w.data(), taps, history.data(), step_u.data(),
                      step.data());
      steps.insert(steps.end(), step.begin(), step.end());
      history.erase(history.begin(), history.begin() + static_cast<std::ptrdiff_t>(W));
      history.insert(history.end(), step_u.begin(), step_u.end());
    }
    EXPECT_EQ(steps, batch) << cpu::target_name(target);
  }
}

}  // namespace
}  // namespace ork
