// Calibration text a model writes for itself, for packing without an
// importance matrix: the activations a quantizer should protect are the
// ones the model produces on its own kind of text, and a model's samples
// are that text in its own language and domain, with nothing shipped.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/model.h"

namespace ork {

struct SelfCalibration {
  std::vector<int32_t> tokens;  // n_windows windows of n_ctx tokens, each begun at `start`
  int32_t start = 0;            // the model's BOS, else its EOS (a document boundary), else 0
};

// Sampled hotter than the model's own distribution: on tinystories656K the
// importance matrix from text sampled at 1.3 packed to KLD 0.0752, at 1.0
// 0.0867, at 1.0 with min-p 0.05 0.1002 (uncalibrated: 0.0995) - narrow
// text covers too few input directions for GPTQ (docs/QUALITY.md).
inline constexpr float kSelfCalibrationTemperature = 1.3f;

// Samples `n_windows` sequences of `n_ctx` tokens from the model, each from
// its start token, at kSelfCalibrationTemperature with no other filter.
// The sequences decode together (Context::eval_together), so the weights
// stream once per step for all of them. Deterministic for a seed and a
// model, whatever the thread count. `progress(done, total)` counts steps.
Result<SelfCalibration> generate_calibration(const Model& model, int n_windows, int n_ctx, uint64_t seed,
                                             const std::function<void(int done, int total)>& progress);

}  // namespace ork
