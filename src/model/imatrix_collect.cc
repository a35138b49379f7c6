#include "model/imatrix_collect.h"

#include <utility>

#include "core/thread_pool.h"
#include "model/forward.h"

namespace ork {

Result<ImportanceMatrix> collect_importance(const Model& model, const std::vector<int32_t>& tokens, int n_ctx,
                                            uint64_t rotation_seed, int bos,
                                            const std::function<void(int, int)>& progress) {
  if (n_ctx < 2) return error(StatusCode::kInvalidArgument, "imatrix: context must be at least 2 tokens");
  const int n_chunks = static_cast<int>(tokens.size() / static_cast<size_t>(n_ctx));
  if (n_chunks == 0) {
    return error(StatusCode::kInvalidArgument, "imatrix: {} calibration tokens do not fill one window of {}",
                 tokens.size(), n_ctx);
  }
  // The sums on the pool the forward pass runs on (idle while the observer runs).
  ImportanceAccumulator acc(rotation_seed, &ThreadPool::global());
  Context ctx(model, n_ctx);
  ctx.set_observer([&](const WeightView& w, const float* x, int n) {
    if (w.name != nullptr) acc.add(w.name, x, n, w.cols);
  });
  uint64_t used = 0;
  std::vector<float> logits;
  for (int c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> window(tokens.begin() + static_cast<long>(c) * n_ctx,
                                tokens.begin() + static_cast<long>(c + 1) * n_ctx);
    if (bos >= 0) window[0] = bos;
    ctx.truncate(0);
    // The output matrix's input seen on every token rather than one a
    // window, without every position's logits: for the 4-layer qwen3.6
    // shape (a 248k vocabulary) those were most of the calibration's
    // arithmetic.
    ORK_RETURN_IF_ERROR(ctx.eval_observing_every_output(window, logits));
    used += window.size();
    if (progress) progress(c + 1, n_chunks);
  }
  return std::move(acc).finish(used);
}

}  // namespace ork
