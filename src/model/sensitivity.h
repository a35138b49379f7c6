// Measured sensitivity: how much the model's logits move when one matrix
// alone is quantized. The tier planner weighs each tensor's quantization
// error by it (PackOptions::sensitivity), because the error a tensor's own
// output takes says little of what it costs the logits: over the tensors
// of tinystories656K the ratio of the two spans a factor of 700, while for
// one tensor it stays within 5 % between nf4 and i5.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/model.h"
#include "ork/status.h"

namespace ork {

struct SensitivityOptions {
  int n_ctx = 128;    // window, as perplexity scores it
  int chunks = 8;     // windows of `tokens` scored per matrix
  int threads = 0;    // windows scored side by side (0: all cores)
  // Groups (quant/planner.h matrix_group) left unmeasured, e.g. MoE routers,
  // which keep their tier.
  std::function<bool(const std::string&)> skip;
};

// For every matrix group of `model` (a tensor; a MoE tensor's experts
// together, under the 3-D tensor's name), the mean KL divergence of the
// logits over `tokens` from `model`'s own when that group alone reads
// `probe`'s matrices of the same names (the same model quantized, say;
// ork pack measures its i8 quantization against its nf4 one, both on the
// fast kernels).
// `model` is changed while this runs and restored before it returns, on
// failure too. Errors name a matrix `probe` lacks or shapes that differ.
// progress(done, total) after each group.
Result<std::map<std::string, double>> measure_sensitivity(Model& model, const Model& probe,
                                                          const std::vector<int32_t>& tokens, int32_t bos,
                                                          const SensitivityOptions& options,
                                                          const std::function<void(int, int)>& progress = nullptr);

}  // namespace ork
