#include "engines/engine.h"

namespace ork {

Result<FencePtr> Engine::submit(const MatmulBatch& batch) {
  const size_t per_group = batch.group_size > 0 ? static_cast<size_t>(batch.group_size) : batch.jobs.size();
  for (size_t i = 0; i < batch.jobs.size(); ++i) {
    if (batch.input_ready) batch.input_ready(static_cast<int>(i), nullptr);
    ORK_ASSIGN_OR_RETURN(FencePtr fence, submit(batch.jobs[i]));
    ORK_RETURN_IF_ERROR(wait(fence));
    if (batch.group_done && (i + 1) % per_group == 0) batch.group_done(static_cast<int>(i / per_group));
  }
  return FencePtr(std::make_shared<DoneFence>(Status::ok()));
}

}  // namespace ork
