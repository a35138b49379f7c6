// Collecting an importance matrix: the forward pass over calibration text
// with an observer that hands every matmul's input to an
// ImportanceAccumulator (quant/imatrix.h).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/model.h"
#include "quant/imatrix.h"

namespace ork {

// Runs the reference forward pass over `tokens` in windows of `n_ctx`
// (each window starting with BOS if `bos` >= 0) and accumulates.
Result<ImportanceMatrix> collect_importance(const Model& model, const std::vector<int32_t>& tokens, int n_ctx,
                                            uint64_t rotation_seed, int bos,
                                            const std::function<void(int done, int total)>& progress);

}  // namespace ork
