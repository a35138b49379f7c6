// The engine contract (DESIGN section 4), shared by the CPU engine and the
// NPU engine:
//   supports(op)  decides from the op's static properties alone (tier,
//                 shape, the engine's scratchpad) and says why it refuses;
//   prepare(op)   builds a fixed KernelParams record on the host, cached by
//                 (op, shape, tier): the program cache;
//   submit(job)   is non-blocking and returns a Fence; wait/poll on it.
// The op here is the quantized matmul y = W x: W an orkpack tier tensor
// (n rows of k stored weights), x m tokens of k floats (already padded and,
// for a rotated tensor, rotated), y m rows of n floats.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ork/status.h"
#include "quant/tier.h"

namespace ork {

// The static description of one matmul: everything supports() and
// prepare() may look at. No buffer is known yet.
struct MatmulOp {
  Tier tier = Tier::kI8;
  int64_t m = 0;  // tokens
  int64_t k = 0;  // stored K (a multiple of 32)
  int64_t n = 0;  // output rows of W
  bool operator==(const MatmulOp&) const = default;
};

// supports()'s answer: yes, or no and why.
struct Support {
  bool ok = false;
  std::string why;
  static Support yes() { return {true, {}}; }
  static Support no(std::string reason) { return {false, std::move(reason)}; }
};

// The buffers of one matmul. `x` is m x k floats (row stride k); `y` gets
// m x n floats (row stride ldy). `w` must outlive the job.
struct MatmulJob {
  MatmulOp op;
  TierTensor w;
  const float* x = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
};

// Completion of a submitted job. Shared between the engine and the caller;
// wait() and poll() go through the engine that made it.
class Fence {
 public:
  virtual ~Fence() = default;
  virtual bool done() const = 0;
  virtual Status wait() = 0;
};
using FencePtr = std::shared_ptr<Fence>;

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;
  virtual Support supports(const MatmulOp& op) const = 0;
  // Builds (and caches) what the op needs on the host before any job of its
  // shape runs; submit() prepares on first use, so calling it is optional.
  virtual Status prepare(const MatmulOp& op) = 0;
  // The job runs when the caller waits on the fence or earlier; the caller
  // keeps every buffer alive until then.
  virtual Result<FencePtr> submit(const MatmulJob& job) = 0;

  static Status wait(const FencePtr& fence) { return fence->wait(); }
  static bool poll(const FencePtr& fence) { return fence->done(); }
};

// A fence that is already signalled, with a status.
class DoneFence final : public Fence {
 public:
  explicit DoneFence(Status s) : status_(std::move(s)) {}
  bool done() const override { return true; }
  Status wait() override { return status_; }

 private:
  Status status_;
};

}  // namespace ork
