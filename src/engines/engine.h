// The engine contract (DESIGN section 4), shared by the CPU engine and the
// NPU engine:
//   supports(op)  decides from the op's static properties alone (tier,
//                 shape, the engine's scratchpad) and says why it refuses;
//   prepare(op)   builds a fixed KernelParams record on the host, cached by
//                 (op, shape, tier): the program cache;
//   submit(job)   is non-blocking and returns a Fence; wait/poll on it. A
//                 device error comes back through the fence's Status.
// The op is the matmul y = W x: W a stored weight (an orkpack tier, or on
// the CPU any GGUF type), x m tokens, y m rows of n floats. A batch is
// several matmuls of one input, which an engine may run as one loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "ork/status.h"
#include "quant/tier.h"
#include "quant/weight_view.h"

namespace ork {

// The static description of one matmul: everything supports() and
// prepare() may look at. No buffer is known yet.
struct MatmulOp {
  Tier tier = Tier::kI8;
  int64_t m = 0;  // tokens
  int64_t k = 0;  // stored K (for a tier, a multiple of 32)
  int64_t n = 0;  // output rows of W
  bool is_tier = true;               // false: a GGUF matrix of `type` (the CPU's)
  GgmlType type = GgmlType::kF32;
  bool operator==(const MatmulOp&) const = default;
  static MatmulOp of(const WeightView& w, int64_t m) {
    return {w.is_tier ? w.tier : Tier::kF32, m, w.k(), w.rows, w.is_tier, w.type};
  }
};

// supports()'s answer: yes, or no and why.
struct Support {
  bool ok = false;
  std::string why;
  static Support yes() { return {true, {}}; }
  static Support no(std::string reason) { return {false, std::move(reason)}; }
};

// One token's input brought into a weight's stored basis and quantized to
// int8 as the integer datapaths read it (pad_rotate_quantize: k codes, the
// token's scale and the sum of its codes). An engine that has made it
// hands it on, so that another engine computing the same rows from the
// same input need not rotate and quantize it again.
struct QuantizedToken {
  const int8_t* codes = nullptr;
  float scale = 0;
  int32_t sum = 0;
  int64_t k = 0;  // the stored K the codes are in
};

// The buffers of one matmul. `x` is m tokens: each `w.cols` floats as the
// model made them (row stride x_stride, default cols), which the engine
// pads and rotates into the weight's stored basis - or, when `x_in_basis`,
// already k floats in that basis (row stride k). `y` gets m x n floats
// (row stride ldy). Everything must outlive the job.
struct MatmulJob {
  MatmulOp op;
  WeightView w;
  const float* x = nullptr;
  bool x_in_basis = false;
  float* y = nullptr;
  int64_t ldy = 0;
  // Only rows [row_begin, row_end) of W (row_end < 0: all), written at
  // their own places in y: the engine's share of a row split. op.n is the
  // number of rows computed.
  int64_t row_begin = 0, row_end = -1;
  // Read only the high plane of an i8s weight: int4 bytes, speed and
  // accuracy (the CPU's share of an overlay).
  bool i8s_high_only = false;
  // Optional, one token: x already quantized in w's stored basis (k ==
  // w.k()). An engine may read these codes instead of quantizing x itself -
  // the same codes it would make; x stays valid. Read during submit() only.
  const QuantizedToken* xq = nullptr;
  int64_t rows_end() const { return row_end < 0 ? w.rows : row_end; }
};

// Several matmuls of one input (q, k and v; gate and up; a token's routed
// experts), which an engine may run as one loop. Jobs come in groups of
// `group_size` (0: one group); when every row of a group is written, the
// engine calls group_done(group) - on any of its threads, once per group,
// with the group's rows visible - so the caller's follow-up work can run
// while the rest is computed. The callback must touch only its group's
// outputs. For one token, input_ready(job, xq) is called on the submitting
// thread for every job, in order, with the input the engine made for it
// (xq, valid during the call), or null when it quantized none: the caller
// may start another engine on the same input meanwhile. The engine's other
// threads may already be computing rows then - a group may even be done,
// and group_done called, before its input_ready returns: what both touch
// is the caller's to order. With inputs_first every input_ready returns
// before any row is computed (an order that does not depend on threads).
struct MatmulBatch {
  std::span<const MatmulJob> jobs;
  int group_size = 0;
  std::function<void(int group)> group_done;
  std::function<void(int job, const QuantizedToken* xq)> input_ready;
  bool inputs_first = false;
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
  // A batch: by default each job in turn, groups reported as they finish,
  // one fence for all.
  virtual Result<FencePtr> submit(const MatmulBatch& batch);

  // The engine's own prediction of a job's time in microseconds from what
  // it knows of itself - a device profile - or < 0 when it has none (the
  // CPU's is calibrated by the dispatcher's performance model).
  virtual double predict_us(const MatmulOp& /*op*/) const { return -1.0; }
  // Jobs submitted and not yet signalled, and how many it can hold: the
  // dispatcher's notion of "free".
  virtual int in_flight() const { return 0; }
  virtual int max_in_flight() const { return 1 << 20; }
  // False for a device that only keeps time (vnpu's `timing`): its fences
  // signal when modeled, but the rows it writes are not the product.
  virtual bool results_valid() const { return true; }
  // Keeps a caller's buffer (a KV cache) reachable by the device for as
  // long as it is pinned; a no-op where memory is simply shared.
  virtual Status pin(const void* /*host*/, int64_t /*bytes*/) { return Status::ok(); }
  virtual void unpin(const void* /*host*/) {}

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
