#include "model/sampler.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ork {
namespace {

const std::vector<float> kLogits = {0.1f, 2.0f, 1.5f, -1.0f, 1.9f, 0.0f};

TEST(Sampler, GreedyIsArgmax) {
  SamplerParams p;
  p.temperature = 0;
  Sampler s(p);
  EXPECT_EQ(s.sample(kLogits), 1);
}

TEST(Sampler, TopKOneIsArgmaxAtAnyTemperature) {
  SamplerParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    p.seed = seed;
    Sampler s(p);
    EXPECT_EQ(s.sample(kLogits), 1);
  }
}

TEST(Sampler, SameSeedSameSequence) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  Sampler a(p), b(p);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(kLogits), b.sample(kLogits));
}

TEST(Sampler, RepetitionPenaltyDemotesRecentTokens) {
  SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 1.5f;  // 2.0 / 1.5 = 1.33 < 1.9: token 4 wins once 1 was seen
  Sampler s(p);
  s.accept(1);
  EXPECT_EQ(s.sample(kLogits), 4);
}

TEST(Sampler, NegativeLogitsArePenalisedByMultiplying) {
  SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 3.0f;
  Sampler s(p);
  const std::vector<float> logits = {-0.5f, -0.6f};
  s.accept(0);  // -0.5 * 3 = -1.5 < -0.6
  EXPECT_EQ(s.sample(logits), 1);
}

TEST(Sampler, TinyTopPOrFullMinPKeepOnlyTheBest) {
  for (int mode = 0; mode < 2; ++mode) {
    SamplerParams p;
    p.temperature = 3.0f;
    p.top_k = 0;
    p.top_p = mode == 0 ? 0.01f : 1.0f;
    p.min_p = mode == 1 ? 1.0f : 0.0f;
    for (uint64_t seed = 0; seed < 20; ++seed) {
      p.seed = seed;
      Sampler s(p);
      EXPECT_EQ(s.sample(kLogits), 1) << "mode " << mode;
    }
  }
}

TEST(Sampler, TopPKeepsTheSmallestSufficientPrefix) {
  // softmax of {ln 0.5, ln 0.3, ln 0.2}: top-p 0.75 keeps the first two only.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.min_p = 0;
  p.top_p = 0.75f;
  std::vector<int> counts(3);
  Sampler s(p);
  for (int i = 0; i < 4000; ++i) counts[static_cast<size_t>(s.sample(logits))]++;
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[0] / 4000.0, 0.625, 0.03);  // 0.5 / 0.8
}

TEST(Sampler, UnfilteredSamplingFollowsTheSoftmax) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  Sampler s(p);
  std::vector<double> want(kLogits.size());
  double z = 0;
  for (size_t i = 0; i < kLogits.size(); ++i) z += want[i] = std::exp(kLogits[i]);
  std::vector<int> counts(kLogits.size());
  const int n = 20000;
  for (int i = 0; i < n; ++i) counts[static_cast<size_t>(s.sample(kLogits))]++;
  for (size_t i = 0; i < kLogits.size(); ++i) {
    const double pi = want[i] / z;
    const double sigma = std::sqrt(pi * (1 - pi) / n);
    EXPECT_NEAR(counts[i] / static_cast<double>(n), pi, 5 * sigma) << "token " << i;
  }
}

TEST(Sampler, TemperatureSharpens) {
  SamplerParams p;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 3;
  int best_hot = 0, best_cold = 0;
  p.temperature = 2.0f;
  Sampler hot(p);
  p.temperature = 0.25f;
  Sampler cold(p);
  for (int i = 0; i < 2000; ++i) {
    best_hot += hot.sample(kLogits) == 1;
    best_cold += cold.sample(kLogits) == 1;
  }
  EXPECT_GT(best_cold, best_hot + 300);
}

}  // namespace
}  // namespace ork
