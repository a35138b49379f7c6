#include "model/self_calibration.h"

#include <memory>
#include <span>

#include "model/forward.h"
#include "model/sampler.h"
#include "model/tokenizer/tokenizer.h"

namespace ork {

Result<SelfCalibration> generate_calibration(const Model& model, int n_windows, int n_ctx, uint64_t seed,
                                             const std::function<void(int, int)>& progress) {
  if (n_windows < 1 || n_ctx < 2) {
    return error(StatusCode::kInvalidArgument, "self-calibration: {} windows of {} tokens: need at least 1 of 2",
                 n_windows, n_ctx);
  }
  const ModelConfig& c = model.config();
  if (n_ctx > c.n_ctx_train) {
    return error(StatusCode::kInvalidArgument, "self-calibration: windows of {} tokens exceed the model's context {}",
                 n_ctx, c.n_ctx_train);
  }
  SelfCalibration out;
  if (auto tok = Tokenizer::from_gguf(model.gguf()); tok.is_ok()) {
    out.start = (*tok)->bos() >= 0 ? (*tok)->bos() : (*tok)->eos() >= 0 ? (*tok)->eos() : 0;
  }
  std::vector<std::unique_ptr<Context>> owned;
  std::vector<Context*> contexts;
  std::vector<Sampler> samplers;
  std::vector<std::vector<int32_t>> windows(static_cast<size_t>(n_windows));
  for (int w = 0; w < n_windows; ++w) {
    owned.push_back(std::make_unique<Context>(model, n_ctx));
    contexts.push_back(owned.back().get());
    SamplerParams p;
    p.temperature = kSelfCalibrationTemperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed + static_cast<uint64_t>(w);
    samplers.emplace_back(p);
    windows[static_cast<size_t>(w)].reserve(static_cast<size_t>(n_ctx));
    windows[static_cast<size_t>(w)].push_back(out.start);
  }
  std::vector<float> logits;
  std::vector<std::span<const int32_t>> step(static_cast<size_t>(n_windows));
  const size_t n_vocab = static_cast<size_t>(c.n_vocab);
  for (int pos = 1; pos < n_ctx; ++pos) {
    for (int w = 0; w < n_windows; ++w) step[static_cast<size_t>(w)] = {&windows[static_cast<size_t>(w)].back(), 1};
    ORK_RETURN_IF_ERROR(Context::eval_together(contexts, step, logits));
    for (int w = 0; w < n_windows; ++w) {
      const std::span<const float> row(logits.data() + static_cast<size_t>(w) * n_vocab, n_vocab);
      windows[static_cast<size_t>(w)].push_back(samplers[static_cast<size_t>(w)].sample(row));
    }
    if (progress) progress(pos, n_ctx - 1);
  }
  out.tokens.reserve(static_cast<size_t>(n_windows) * static_cast<size_t>(n_ctx));
  for (const auto& w : windows) out.tokens.insert(out.tokens.end(), w.begin(), w.end());
  return out;
}

}  // namespace ork
