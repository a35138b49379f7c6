// Every compiled SIMD target of the recurrent token mixers against the
// scalar references: the short convolution sums its taps in f32 with fused
// multiply-adds where the reference sums in double, so it is held to a
// relative 1e-6 of sum |w u| (at most 64 taps); the DeltaNet's convolution
// and delta rule to the bounds stated at each test; and a batch must equal
// its tokens one at a time, bit for bit, on every target.
#include "kernels/cpu/recurrent_ops.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
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

// The convolution with SiLU: the same taps as short_conv (FMA in f32 vs
// double) and a polynomial exp on vector lanes, so a relative 1e-6 of the
// tap magnitude plus 2e-6 of the result.
TEST_F(RecurrentEveryTarget, ConvSiluMatchesReference) {
  for (int width : {1, 9, 16, 100}) {
    for (int taps : {2, 4}) {
      const int n = 6;
      const auto W = static_cast<size_t>(width);
      const auto x = normal_vector(static_cast<size_t>(n) * W, 11);
      const auto w = normal_vector(static_cast<size_t>(taps) * W, 12);
      const auto history = normal_vector(static_cast<size_t>(taps - 1) * W, 13);
      std::vector<float> want(static_cast<size_t>(n) * W);
      ref::conv_silu(x.data(), n, width, w.data(), taps, history.data(), want.data());
      for (int target = 0; target < cpu::compiled_target_count(); ++target) {
        cpu::force_target(target);
        std::vector<float> got(want.size());
        cpu::conv_silu(x.data(), n, width, w.data(), taps, history.data(), got.data());
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::fabs(want[i])))
              << cpu::target_name(target) << " width " << width << " taps " << taps << " at " << i;
        }
        // A batch equals its tokens one at a time.
        std::vector<float> hist = history, step(W), steps;
        for (int t = 0; t < n; ++t) {
          cpu::conv_silu(&x[static_cast<size_t>(t) * W], 1, width, w.data(), taps, hist.data(), step.data());
          steps.insert(steps.end(), step.begin(), step.end());
          hist.erase(hist.begin(), hist.begin() + static_cast<std::ptrdiff_t>(W));
          hist.insert(hist.end(), x.begin() + static_cast<std::ptrdiff_t>(t * W),
                      x.begin() + static_cast<std::ptrdiff_t>((t + 1) * W));
        }
        EXPECT_EQ(steps, got) << cpu::target_name(target);
      }
    }
  }
}

// One head's delta-rule inputs: n tokens of q | k | v, beta in [0, 1), a
// decay per token from `decay_of(t, u)` (u uniform in [0, 1)), a random
// start state, and the double reference's state and outputs after them.
struct DeltaCase {
  int k_dim, v_dim, n;
  int64_t stride;
  std::vector<float> qkv, beta, decay, S0, want_s, want;
  float scale, scale_s = 0, scale_o = 0;  // 1/sqrt(k_dim); largest |state| and |output|
  const float* q() const { return qkv.data(); }
  const float* k() const { return qkv.data() + k_dim; }
  const float* v() const { return qkv.data() + 2 * k_dim; }

  template <class DecayOf>
  DeltaCase(int kd, int vd, int tokens, uint32_t seed, DecayOf decay_of)
      : k_dim(kd), v_dim(vd), n(tokens), stride(3 * std::max(kd, vd)),
        qkv(normal_vector(static_cast<size_t>(tokens * stride), seed)), beta(static_cast<size_t>(tokens)),
        decay(static_cast<size_t>(tokens)), S0(normal_vector(static_cast<size_t>(kd * vd), seed + 2)),
        scale(1.0f / std::sqrt(static_cast<float>(kd))) {
    std::mt19937 rng(seed + 1);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (int t = 0; t < n; ++t) {
      beta[static_cast<size_t>(t)] = u(rng);
      decay[static_cast<size_t>(t)] = decay_of(t, u(rng));
    }
    want_s = S0;
    want.resize(static_cast<size_t>(n * v_dim));
    ref::delta_rule(want_s.data(), k_dim, v_dim, n, q(), k(), v(), stride, beta.data(), decay.data(), 1, scale,
                    want.data(), v_dim);
    for (float x : want_s) scale_s = std::max(scale_s, std::fabs(x));
    for (float x : want) scale_o = std::max(scale_o, std::fabs(x));
  }
};

// The delta rule over 40 tokens from a random state, decays 0.25..0.99:
// the f32 kernel against the double reference (state and outputs, to a
// relative 2e-5 of their scale), and a batch against one token at a time,
// bit for bit, on every target.
TEST_F(RecurrentEveryTarget, DeltaRuleMatchesReferenceAndSteps) {
  for (auto [k_dim, v_dim] : {std::pair<int, int>{64, 64}, {16, 24}, {128, 128}, {7, 13}}) {
    const int n = 40;
    const DeltaCase c(k_dim, v_dim, n, 21, [](int, float u) { return 0.25f + 0.74f * u; });
    const float *q = c.q(), *k = c.k(), *v = c.v();
    const int64_t stride = c.stride;
    for (int target = 0; target < cpu::compiled_target_count(); ++target) {
      cpu::force_target(target);
      std::vector<float> s = c.S0, got(c.want.size());
      cpu::delta_rule(s.data(), k_dim, v_dim, n, q, k, v, stride, c.beta.data(), c.decay.data(), 1, c.scale, got.data(),
                      v_dim);
      for (size_t i = 0; i < s.size(); ++i) ASSERT_NEAR(s[i], c.want_s[i], 2e-5f * c.scale_s) << cpu::target_name(target);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], c.want[i], 2e-5f * c.scale_o) << cpu::target_name(target);
      std::vector<float> s1 = c.S0, steps(c.want.size());
      for (int t = 0; t < n; ++t) {
        cpu::delta_rule(s1.data(), k_dim, v_dim, 1, q + t * stride, k + t * stride, v + t * stride, stride,
                        &c.beta[static_cast<size_t>(t)], &c.decay[static_cast<size_t>(t)], 1, c.scale,
                        &steps[static_cast<size_t>(t * v_dim)], v_dim);
      }
      EXPECT_EQ(steps, got) << cpu::target_name(target);
      EXPECT_EQ(s1, s) << cpu::target_name(target);
    }
  }
}

// The chunked (WY) form against the step-by-step recurrence: 150 tokens
// (two whole chunks and a part), 5 tokens (one part) and exactly one chunk,
// from a random state, with decays from near 1 down to 0 (a decay that
// underflowed) and runs of small ones whose product underflows across a
// chunk - state and outputs to a relative 1e-5 of their scale (the largest
// seen is 1.3e-6), every target.
TEST_F(RecurrentEveryTarget, ChunkedDeltaRuleMatchesTheRecurrence) {
  for (auto [k_dim, v_dim] : {std::pair<int, int>{128, 128}, {64, 64}, {16, 24}, {7, 13}}) {
    for (int n : {150, 5, cpu::kDeltaChunk}) {
      const DeltaCase c(k_dim, v_dim, n, 31, [](int t, float u) {
        return t % 37 == 3 ? 0.0f : (t / 20) % 3 == 1 ? 0.02f * u : 0.25f + 0.75f * u;
      });
      for (int target = 0; target < cpu::compiled_target_count(); ++target) {
        cpu::force_target(target);
        std::vector<float> s = c.S0, got(c.want.size());
        cpu::delta_rule_chunked(s.data(), k_dim, v_dim, n, c.q(), c.k(), c.v(), c.stride, c.beta.data(),
                                c.decay.data(), 1, c.scale, got.data(), v_dim);
        const std::string at = fmt::format("{} k{} v{} n{}", cpu::target_name(target), k_dim, v_dim, n);
        for (size_t i = 0; i < s.size(); ++i) ASSERT_NEAR(s[i], c.want_s[i], 1e-5f * c.scale_s) << at << " state " << i;
        for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], c.want[i], 1e-5f * c.scale_o) << at << " out " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ork
