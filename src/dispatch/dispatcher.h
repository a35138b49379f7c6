// The dispatcher (DESIGN section 5): the one door through which the model
// reaches the engines. Every matmul node - each MoE expert included - is
// routed to one of
//   kCpu      the CPU alone;
//   kNpu      the NPU alone (prefill, where the model predicts it wins);
//   kSplit    rows split between CPU and NPU, sized so both finish together;
//   kOverlay  the CPU computes the complete result from an i8s weight's high
//             plane (int4 speed, the critical path) while the NPU computes
//             the same rows at W8A8 from both planes, non-blocking; when the
//             result is needed it is the NPU's if its fence has signalled,
//             else the CPU's. Never a wait.
// Rules (router.h): at M = 1 the NPU is never a join; the overlay runs only
// when the NPU is free; prefill goes where the performance model predicts it
// is fastest. Every decision is counted (Stats).
//
// The element-wise ops and attention run on the CPU engine (ops()).
// One Dispatcher per sequence (Context); the NPU engine may be shared.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dispatch/job_slots.h"
#include "dispatch/overlay.h"
#include "dispatch/perf_model.h"
#include "dispatch/router.h"
#include "engines/engine.h"
#include "engines/host_ops.h"

namespace ork {

class CpuEngine;
class ReadRecord;
class ThreadPool;
class Trace;

// A token batch through one MoE layer's routed experts (see ExpertsJob in
// engines/cpu/cpu_engine.h, which this becomes on the CPU).
struct ExpertsCall {
  std::span<const WeightView> gate, up, down;  // per expert
  const int32_t* ids = nullptr;                // n x k
  const float* weights = nullptr;              // n x k
  int n = 0, k = 0;
  int64_t n_embd = 0, n_ff = 0;
  const float* x = nullptr;                    // n x n_embd
  float* acc = nullptr;                        // n x n_embd, zero on entry
  std::function<void()> after_gate_up;         // decode: between its two loops (a profile lap)
  // Decode: weights still arriving (ExpertsJob::present, ::await).
  std::function<bool(int expert)> present;
  std::function<void(int expert)> await;
};

class Dispatcher {
 public:
  explicit Dispatcher(ThreadPool* pool = nullptr);
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // The CPU's kernels: the SIMD ones (default) or the scalar reference.
  void set_fast_kernels(bool on);
  bool fast_kernels() const;
  // The NPU (null: none) and how to use it. The engine must outlive the
  // dispatcher's use of it (set_npu(nullptr) first).
  void set_npu(Engine* npu, const DispatchOptions& options = {});
  Engine* npu() const { return npu_; }
  const DispatchOptions& options() const { return options_; }
  // Decoding (M = 1) without an NPU: read i8s weights from their high plane
  // alone (int4) on the CPU instead of both planes (int8) - what the CPU's
  // part of an overlay costs and gives, for comparison. Batches read both.
  void set_i8s_high_only(bool on) { i8s_high_only_ = on; }
  // CPU phases and dispatch decisions go to this trace (null: none).
  void set_trace(Trace* trace);
  // Decode's CPU loops record the weight bytes they read here (null: none).
  void set_read_record(ReadRecord* record);

  // Buffers the NPU keeps mapped while this sequence lives (its KV cache).
  Status pin(const void* host, int64_t bytes);
  void unpin_all();

  HostOps& ops();

  // A decode step (one token through the model) begins and ends: the
  // overlay's host budget is a share of the time inside steps, not of the
  // pauses between them (a server's idle slot, the other half of a paired
  // benchmark, the caller's sampling). Without them it earns on all time.
  void begin_step() { overlay_.begin_step(); }
  void end_step() { overlay_.end_step(); }

  // y = W x for n tokens (x: n rows of w.cols floats, as the model made them).
  Status matmul(const WeightView& w, const float* x, int n, float* y);
  // Matmuls reading one input; done(i), if given, is called once output i
  // is complete - possibly on another thread, while the rest is computed,
  // so it must touch only its own output.
  struct Output {
    const WeightView* w;
    float* y;
  };
  Status matmul_shared(std::span<const Output> outs, const float* x, int n, const std::function<void(int)>& done);
  // The routed experts, fused where the CPU can (every active expert an
  // integer tier on the fast kernels); false when not done, for the caller
  // to run them one expert at a time through matmul().
  Result<bool> experts(const ExpertsCall& call);

  const DispatchStats& stats() const { return stats_; }
  void reset_stats() { stats_ = DispatchStats(); }
  // The performance model in use (options().model, or the built-in defaults).
  const PerfModel& model() const;

 private:
  Status prefill(const MatmulJob& job);
  Status wait_npu(const FencePtr& fence);
  bool overlay_candidate(const WeightView& w, int n) const;
  // A candidate counted under its role (measurement clocks only).
  void count_role(const WeightView& w, int n);
  MatmulJob make_job(const WeightView& w, const float* x, int n, float* y) const;

  std::unique_ptr<CpuEngine> cpu_;
  PerfModel default_model_;
  Engine* npu_ = nullptr;
  DispatchOptions options_;
  bool i8s_high_only_ = false;
  Trace* trace_ = nullptr;
  int track_ = 0;
  std::vector<const void*> pinned_;
  Overlay overlay_;
  DispatchStats stats_;
  std::vector<MatmulJob> jobs_;
  JobSlots overlay_slots_;  // matmul_shared's outputs, or the experts' downs
  std::vector<double> overlay_cpu_us_;  // matmul_shared: the CPU's modeled work up to each output
  std::vector<char> overlay_open_;      // matmul_shared: whether each output's job is opened
};

}  // namespace ork
