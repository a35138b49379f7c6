// The CPU engine behind the engine contract: the scalar reference kernels
// (the oracle) or the Highway kernels, on the thread pool. Jobs run inside
// submit(); the fence it returns is already signalled.
#pragma once

#include <vector>

#include "engines/engine.h"

namespace ork {

class ThreadPool;

class CpuEngine final : public Engine {
 public:
  enum class Kernels { kReference, kFast };
  explicit CpuEngine(Kernels kernels, ThreadPool* pool = nullptr);

  std::string name() const override { return kernels_ == Kernels::kFast ? "cpu" : "cpu-ref"; }
  Support supports(const MatmulOp& op) const override;
  // The CPU kernels need no per-shape program: this only checks supports().
  Status prepare(const MatmulOp& op) override;
  Result<FencePtr> submit(const MatmulJob& job) override;

 private:
  Kernels kernels_;
  ThreadPool* pool_;
  std::vector<int8_t> q_;
  std::vector<float> scales_;
  std::vector<int32_t> sums_;
};

}  // namespace ork
