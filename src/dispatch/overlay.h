// The speculative int8 overlay (DESIGN section 1.4): while the CPU computes
// a sensitive (i8s) matmul's complete result from the weight's high plane,
// the NPU computes the same rows at W8A8 from both planes. When the
// consumer needs the result, resolve() takes the NPU's if it is ready -
// by the clock in use - and otherwise leaves the CPU's. In wall-clock mode
// it never waits: a device that never signals changes nothing but quality.
//
// Jobs are opened on one thread at a time; resolve(i) may run on any
// thread, once per job, each touching only its own job's output - also
// while another job is being opened (a job's index is handed to its
// resolver through something that orders the two, a JobSlots). A call
// opens at most kMaxJobs; jobs are kept where they are until finish().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

#include "dispatch/router.h"
#include "engines/engine.h"

namespace ork {

class PerfModel;

class Overlay {
 public:
  // The clock and the rates it times with: the NPU's own predictions
  // (Engine::predict_us) and, for the CPU, the performance model of this
  // machine (wall clock) or the device's CPU read rate (virtual clock).
  void configure(Engine* npu, const DispatchOptions& o, const PerfModel* model, double cpu_gbps);
  bool enabled() const { return npu_ != nullptr && options_.overlay; }
  // A measurement clock (virtual or forced): its choices may not depend on
  // threads, so jobs are opened before the CPU's loops start, not beside them.
  bool measuring() const;
  // Whether the NPU can take a group of `jobs` more overlay jobs now.
  bool npu_free(int jobs) const;

  // Starts the NPU's W8A8 job for w over x (1 token, raw), whose CPU result
  // goes to cpu_y. `cpu_us_before` is the CPU's modeled work from now until
  // this result is complete (the virtual clock). `xq`, when given, is x as
  // the CPU quantized it in w's basis: the device reads those codes, and
  // the host does not rotate and quantize x again. Returns the job's index,
  // or -1 if it was not started (kMaxJobs open already; a submission error
  // is returned).
  Result<int> open(const WeightView& w, const float* x, float* cpu_y, double cpu_us_before,
                   const QuantizedToken* xq = nullptr);
  // The same when the CPU's rows are known only when they are consumed
  // (an engine's own buffers): the NPU writes to the overlay's buffer, and
  // resolve_into copies it over them on a hit.
  Result<int> open_deferred(const WeightView& w, const float* x, double cpu_us_before,
                            const QuantizedToken* xq = nullptr);
  // The consumer needs job i's output: the NPU's replaces the CPU's when it
  // is ready. A device error surfaces here. i < 0: nothing to do.
  Status resolve(int i);
  Status resolve_into(int i, float* cpu_y);
  // The CPU's modeled work already done since the call began (the first
  // loop of the experts, before their downs are opened): a job opened
  // from now on starts no earlier - without it, a down job looked as if it
  // had started with the layer, and jobs that were sure to miss were
  // opened. finish() sets it back to 0.
  void set_cpu_elapsed(double cpu_us) { cpu_elapsed_us_ = cpu_us; }
  // A decode step's bounds (Dispatcher::begin_step): only the time between
  // them earns the host budget.
  void begin_step();
  void end_step();
  // Ends the token's overlay jobs (those never resolved count as misses)
  // and advances the virtual clock by the CPU time of what ran.
  void finish(double cpu_us);

  // Counts since the last take: hits, misses.
  void add_counts(DispatchStats& s);
  // The CPU's modeled time for a matmul at M = 1 by the clock's rates.
  double cpu_us(const WeightView& w, bool i8s_high_only) const;
  // Whether the NPU, started now, is predicted to finish w's job before the
  // consumer needs it `cpu_us_before` from now: a job that would miss only
  // keeps the device busy, so it is not started (the forced clock starts all).
  bool worth(const WeightView& w, double cpu_us_before) const;
  // Whether the host time of one more job fits the budget (wall clock; see
  // DispatchOptions::overlay_budget): the budget's share of the time decode
  // has taken (measured: the performance model knows the matmuls, not the
  // rest of a token), less the time the overlay's own calls took, must
  // cover a job's measured cost - `planned` more jobs' too, decided on but
  // not opened yet.
  bool affordable(int planned = 0) const;

 private:
  static constexpr size_t kMaxJobs = 256;
  struct Job {
    FencePtr fence;
    double npu_done_us = 0;   // virtual: when the NPU's result is there
    double needed_us = 0;     // virtual: when the consumer needs it
    uint64_t serial = 0;      // the forced clock's choice depends on it alone
    double rate = 1.0;        // forced: the share of its role's jobs that hit
    std::string_view role;    // measurement clocks: its tensor's role (overlay_role)
    bool resolved = false;
    bool took = false;        // a hit: the NPU's rows were used
    std::vector<float>* buffer = nullptr;  // open_deferred's result rows
    float* cpu_y = nullptr;   // measurement clocks: where a hit's rows go
  };
  bool timed() const { return enabled() && options_.clock == OverlayClock::kWall; }
  bool budgeted() const { return timed() && options_.overlay_budget < 1.0; }
  double since_finish_us() const;
  // The bucket's depth: kCreditUs, or two jobs at their measured cost where
  // a job costs more (a bucket shallower than one job never affords it).
  double depth_us() const;
  // Times a public call's host work into spent_ns_ (wall clock only).
  class Charge;
  Result<int> open_job(const WeightView& w, const float* x, float* cpu_y, double cpu_us_before, const QuantizedToken* xq);
  Result<int> open_deferred_job(const WeightView& w, const float* x, double cpu_us_before, const QuantizedToken* xq);
  Status resolve_job(int i);
  // A hit's rows to where they go - or, from a device that only keeps time
  // (results_valid() false), to a sink: the same bytes moved, the CPU's rows
  // left as they are, so a timed run computes what a CPU-only run does.
  void take(const std::vector<float>& rows, float* dst);
  bool opening_deferred_ = false;
  bool hit(Job& j, uint64_t serial) const;
  // The NPU's predicted time for w at M = 1, kept per shape here: a token
  // asks for one at every candidate, and the engine's own cache is behind
  // its lock. A few shapes per model, so a short list.
  double device_us(const WeightView& w) const;
  struct Predicted {
    MatmulOp op;
    double us;
  };
  mutable std::vector<Predicted> predicted_;

  Engine* npu_ = nullptr;
  DispatchOptions options_;
  const PerfModel* model_ = nullptr;
  double cpu_gbps_ = 20.0;
  std::vector<Job> jobs_;  // reserved for kMaxJobs: never moved while a call runs
  std::deque<std::vector<float>> buffers_;  // kept from token to token
  // The virtual clock: the CPU's modeled time, and when the NPU is next free.
  double cpu_now_us_ = 0, npu_free_us_ = 0, cpu_elapsed_us_ = 0;
  uint64_t serial_ = 0;  // overlay jobs opened so far (the forced clock's hash input)
  // The host budget, a token bucket: credit carried from call to call (at
  // most depth_us(), kCreditUs unless two jobs cost more; it starts with
  // kCreditUs: a burst of a few jobs, never a long stretch's savings; a
  // fixed 100 us had starved any device whose job took the host longer,
  // at any budget below 1), the host time the current
  // call's jobs have taken (any thread), the jobs it opened, and a job's
  // measured cost (a running mean).
  static constexpr double kCreditUs = 100;
  double credit_us_ = kCreditUs, job_cost_us_ = 0;
  double host_us_ = 0;  // spent, since the last add_counts
  std::atomic<int64_t> spent_ns_{0};
  int call_jobs_ = 0;
  std::chrono::steady_clock::time_point last_finish_ = std::chrono::steady_clock::now();
  std::atomic<uint64_t> hits_{0}, misses_{0};
  std::vector<OverlayRoleCount> role_hits_;  // measurement clocks: hits by role, since add_counts
};

}  // namespace ork
