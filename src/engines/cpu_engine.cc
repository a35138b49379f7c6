#include "engines/cpu_engine.h"

#include "core/thread_pool.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/ref/quant_matmul.h"

namespace ork {

CpuEngine::CpuEngine(Kernels kernels, ThreadPool* pool)
    : kernels_(kernels), pool_(pool != nullptr ? pool : &ThreadPool::global()) {}

Support CpuEngine::supports(const MatmulOp& op) const {
  if (float_tier(op.tier)) {
    return Support::no("float tiers run through the float matmul, not the integer engine contract");
  }
  if (op.m < 1 || op.n < 1 || op.k < 32 || op.k % 32 != 0) return Support::no("k must be a positive multiple of 32");
  return Support::yes();
}

Status CpuEngine::prepare(const MatmulOp& op) {
  const Support s = supports(op);
  return s.ok ? Status::ok() : error(StatusCode::kUnsupported, "{}: {}", name(), s.why);
}

Result<FencePtr> CpuEngine::submit(const MatmulJob& job) {
  const Support s = supports(job.op);
  if (!s.ok) return error(StatusCode::kUnsupported, "{}: {}", name(), s.why);
  const auto m = static_cast<int>(job.op.m);
  const int64_t k = job.op.k;
  q_.resize(static_cast<size_t>(m * k));
  scales_.resize(static_cast<size_t>(m));
  sums_.resize(static_cast<size_t>(m));
  const bool fast = kernels_ == Kernels::kFast;
  if (fast) {
    cpu::quantize_acts(job.x, m, k, q_.data(), scales_.data(), sums_.data());
  } else {
    ref::quantize_acts(job.x, m, k, q_.data(), scales_.data(), sums_.data());
  }
  const QuantWeights w = quant_weights(job.w, false);
  const QuantActs a{q_.data(), scales_.data(), sums_.data(), k, m};
  pool_->run(job.op.n, [&](int64_t b, int64_t e) {
    (fast ? cpu::quant_matmul : ref::quant_matmul)(w, a, job.y, job.ldy, b, e);
  });
  return FencePtr(std::make_shared<DoneFence>(Status::ok()));
}

}  // namespace ork
