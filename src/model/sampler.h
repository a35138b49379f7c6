// Token sampling, in llama.cpp's default order: repetition penalty, top-k,
// top-p, min-p, temperature, then a draw from the distribution. A
// temperature of 0 means greedy (argmax; the other filters do not matter).
//
// Deterministic for a given seed. Not thread-safe: one Sampler per sequence.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <vector>

namespace ork {

struct SamplerParams {
  float temperature = 0.8f;     // <= 0: greedy
  int top_k = 40;               // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off. >1 divides positive logits (multiplies negative) of recent tokens
  int repeat_last_n = 64;       // how many recent tokens the penalty sees
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params);

  // Picks a token from `logits` (n_vocab values) and remembers it for the
  // repetition penalty.
  int32_t sample(std::span<const float> logits);
  // Remembers a token that was not sampled (the prompt), for the penalty.
  void accept(int32_t token);

  const SamplerParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };

  SamplerParams params_;
  std::mt19937_64 rng_;
  std::deque<int32_t> recent_;
  std::vector<Candidate> candidates_;
};

}  // namespace ork
