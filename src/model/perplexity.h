// Perplexity and the distribution-distance measures of llama.cpp's
// perplexity tool, computed the same way: the text is cut into windows of
// n_ctx tokens (the first replaced by BOS), each evaluated from an empty
// cache, and only the second half of each window is scored (positions
// n_ctx/2 .. n_ctx-2 predicting the next token), so every scored token has
// at least n_ctx/2 tokens of context.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "dispatch/router.h"
#include "model/model.h"
#include "ork/status.h"

namespace ork {

class Context;

struct Estimate {
  double value = 0;
  double err = 0;  // one standard error
};

struct QualityStats {
  uint64_t tokens = 0;
  Estimate ppl;
  Estimate ln_ppl;       // mean negative log-likelihood
  bool has_base = false;
  Estimate kld;          // mean KL(base || model)
  Estimate top1;         // fraction of tokens whose argmax agrees with the base
  Estimate rms_dp;       // RMS of p_model(next) - p_base(next)
  Estimate base_ppl;
};

// What one scored token contributes.
struct TokenScore {
  double nll = 0;
  bool has_base = false;
  double base_nll = 0, kld = 0, same_top1 = 0, dp = 0;
};

// Scores one position: log-prob vectors are n_vocab long; base may be empty.
TokenScore score_token(std::span<const float> logprobs, std::span<const float> base_logprobs, int32_t target);

class QualityAccumulator {
 public:
  void add(const TokenScore& score);
  QualityStats finish() const;

 private:
  uint64_t n_ = 0;
  double nll_ = 0, nll2_ = 0, base_nll_ = 0, base_nll2_ = 0;
  double kld_ = 0, kld2_ = 0, same_ = 0, dp2_ = 0, dp4_ = 0;
  bool has_base_ = false;
};

// In-place log-softmax.
void log_softmax(std::span<float> logits);

// Log-probabilities (n_vocab each) of the scored positions of one window.
using WindowScores = std::vector<std::vector<float>>;

struct PerplexityOptions {
  int n_ctx = 128;
  int max_chunks = 0;  // 0 = every full window
  int threads = 0;     // windows scored in parallel; 0 = hardware concurrency
  bool reference_kernels = false;  // score with the scalar reference path (weights' quality alone)
  // Score the way generation runs: each window's first half as one batch
  // (a prompt), then every scored position decoded one token at a time -
  // the path the NPU overlay and other decode-only routes take.
  bool decode = false;
  // Called on each Context of the model (not the base's) before it scores:
  // an NPU, dispatch options, i8s reading. Contexts on several threads may
  // share what it attaches.
  std::function<void(Context&)> setup;
  // If set, receives the routing decisions of every Context that scored.
  DispatchStats* dispatch_stats = nullptr;
};

// Scores `tokens` with `model` and, if given, compares with `base`
// (another model, e.g. the f32 original) or with stored base log-probs
// (`base_scores`, one WindowScores per chunk). `save_base`, if set,
// receives the model's own scores per chunk (to store as a base).
Result<QualityStats> measure_quality(const Model& model, const std::vector<int32_t>& tokens, int32_t bos,
                                     const PerplexityOptions& options, const Model* base,
                                     const std::vector<WindowScores>* base_scores,
                                     std::vector<WindowScores>* save_base,
                                     const std::function<void(int, int)>& progress);

}  // namespace ork
