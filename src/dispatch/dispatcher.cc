#include "dispatch/dispatcher.h"

#include <algorithm>
#include <numeric>

#include "core/thread_pool.h"
#include "core/trace.h"
#include "engines/cpu/cpu_engine.h"

namespace ork {
namespace {

bool is_i8s(const WeightView& w) { return w.is_tier && w.tier == Tier::kI8s; }

// A token's routed slots in the order of their experts' ids (the CPU
// engine's positions p).
std::vector<int> expert_order(const int32_t* ids, int k) {
  std::vector<int> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return ids[a] < ids[b]; });
  return order;
}

}  // namespace

Dispatcher::Dispatcher(ThreadPool* pool)
    : cpu_(std::make_unique<CpuEngine>(CpuEngine::Kernels::kFast, pool)),
      default_model_(PerfModel::defaults(cpu_->pool().size())) {}

Dispatcher::~Dispatcher() { set_npu(nullptr); }

void Dispatcher::set_fast_kernels(bool on) {
  cpu_->set_kernels(on ? CpuEngine::Kernels::kFast : CpuEngine::Kernels::kReference);
}

bool Dispatcher::fast_kernels() const { return cpu_->fast(); }

void Dispatcher::set_npu(Engine* npu, const DispatchOptions& options) {
  unpin_all();
  npu_ = npu;
  options_ = options;
  overlay_.configure(npu, options, &model(), options.device_cpu_gbps);
}

void Dispatcher::set_read_record(ReadRecord* record) { cpu_->set_read_record(record); }

void Dispatcher::set_trace(Trace* trace) {
  trace_ = trace;
  track_ = trace != nullptr ? trace->track("dispatch") : 0;
}

const PerfModel& Dispatcher::model() const { return options_.model != nullptr ? *options_.model : default_model_; }

Status Dispatcher::pin(const void* host, int64_t bytes) {
  if (npu_ == nullptr || bytes <= 0) return Status::ok();
  if (std::find(pinned_.begin(), pinned_.end(), host) != pinned_.end()) return Status::ok();
  ORK_RETURN_IF_ERROR(npu_->pin(host, bytes));
  pinned_.push_back(host);
  return Status::ok();
}

void Dispatcher::unpin_all() {
  if (npu_ != nullptr) {
    for (const void* p : pinned_) npu_->unpin(p);
  }
  pinned_.clear();
}

HostOps& Dispatcher::ops() { return *cpu_; }

MatmulJob Dispatcher::make_job(const WeightView& w, const float* x, int n, float* y) const {
  MatmulJob job;
  job.op = MatmulOp::of(w, n);
  job.w = w;
  job.x = x;
  job.y = y;
  job.ldy = w.rows;
  // Decoding with an NPU the CPU reads i8s weights from their high plane:
  // the overlay's critical path, whether or not the NPU adds to it this
  // time. Prefill reads both planes (int8), as the NPU does.
  job.i8s_high_only = is_i8s(w) && n == 1 && (i8s_high_only_ || overlay_.enabled());
  return job;
}

bool Dispatcher::overlay_candidate(const WeightView& w, int n) const {
  return n == 1 && overlay_.enabled() && is_i8s(w) && cpu_->fast();
}

void Dispatcher::count_role(const WeightView& w, int n) {
  if (overlay_.measuring() && overlay_candidate(w, n)) ++stats_.role(overlay_role(w.name)).candidates;
}

Status Dispatcher::wait_npu(const FencePtr& fence) {
  // A device error is the caller's error: the CPU does not quietly take over.
  const Status s = Engine::wait(fence);
  if (!s.is_ok()) return s.with_context(npu_->name());
  return Status::ok();
}

Status Dispatcher::matmul(const WeightView& w, const float* x, int n, float* y) {
  MatmulJob job = make_job(w, x, n, y);
  if (n == 1) {
    const double cpu_us = overlay_.enabled() ? overlay_.cpu_us(w, job.i8s_high_only) : 0.0;
    int idx = -1;
    FencePtr f;
    count_role(w, n);
    if (overlay_candidate(w, n)) {
      // The budget is asked only of a job that would be opened (it reads
      // the clock): most candidates are turned away before, as late.
      if (!overlay_.npu_free(1) || !overlay_.worth(w, cpu_us)) {
        ++stats_.overlay_skipped;
      } else if (!overlay_.affordable()) {
        ++stats_.overlay_over_budget;
      } else {
        // Opened once the CPU has quantized the input, on the same codes.
        Status opened;
        const MatmulJob one[1] = {job};
        ORK_ASSIGN_OR_RETURN(f, cpu_->submit(MatmulBatch{one, 0, nullptr, [&](int, const QuantizedToken* xq) {
                                                            Result<int> r = overlay_.open(w, x, y, cpu_us, xq);
                                                            if (r.is_ok()) idx = *r;
                                                            else opened = r.status();
                                                          }}));
        ORK_RETURN_IF_ERROR(Engine::wait(f));
        ORK_RETURN_IF_ERROR(opened);
      }
    }
    ++stats_.decode[static_cast<size_t>(idx >= 0 ? Route::kOverlay : Route::kCpu)];
    if (f == nullptr) {
      ORK_ASSIGN_OR_RETURN(f, cpu_->submit(job));
      ORK_RETURN_IF_ERROR(Engine::wait(f));
    }
    const Status resolved = overlay_.resolve(idx);
    overlay_.finish(cpu_us);
    overlay_.add_counts(stats_);
    return resolved;
  }
  return prefill(job);
}

Status Dispatcher::prefill(const MatmulJob& job) {
  const WeightView& w = job.w;
  PrefillChoice c;
  if (npu_ != nullptr && options_.prefill) {
    c = choose_prefill(model(), npu_, job.op, options_.split);
    const bool readable = npu_->supports(job.op).ok;
    if (!readable) ++stats_.npu_refused;
    if (options_.force_prefill && readable) {
      c.route = *options_.force_prefill;
      c.npu_rows = c.route == Route::kNpu ? w.rows : 0;
      if (c.route == Route::kSplit) {
        c.npu_rows = std::clamp<int64_t>(static_cast<int64_t>(options_.split_fraction * static_cast<double>(w.rows)) / 32 * 32,
                                         1, w.rows - 1);
        if (w.rows < 2) c.route = Route::kNpu;
      }
    }
  } else {
    c.route = Route::kCpu;
  }
  ++stats_.prefill[static_cast<size_t>(c.route)];
  if (npu_ != nullptr) {
    stats_.record(job.op, c);
    stats_.modeled_cpu_us += c.cpu_us;
    stats_.modeled_npu_us += c.npu_us;
    stats_.modeled_routed_us += c.routed_us;
  }
  TraceScope scope(trace_, route_name(c.route), track_, job.op.m);
  switch (c.route) {
    case Route::kNpu: {
      stats_.npu_rows += static_cast<uint64_t>(w.rows);
      ORK_ASSIGN_OR_RETURN(FencePtr f, npu_->submit(job));
      return wait_npu(f);
    }
    case Route::kSplit: {
      // The NPU's rows first (non-blocking), the CPU's meanwhile, then both.
      MatmulJob on_npu = job, on_cpu = job;
      on_npu.row_end = c.npu_rows;
      on_npu.op.n = c.npu_rows;
      on_cpu.row_begin = c.npu_rows;
      on_cpu.op.n = w.rows - c.npu_rows;
      stats_.npu_rows += static_cast<uint64_t>(c.npu_rows);
      stats_.cpu_rows += static_cast<uint64_t>(w.rows - c.npu_rows);
      ORK_ASSIGN_OR_RETURN(FencePtr nf, npu_->submit(on_npu));
      ORK_ASSIGN_OR_RETURN(FencePtr cf, cpu_->submit(on_cpu));
      ORK_RETURN_IF_ERROR(Engine::wait(cf));
      return wait_npu(nf);
    }
    default: {
      ORK_ASSIGN_OR_RETURN(FencePtr f, cpu_->submit(job));
      return Engine::wait(f);
    }
  }
}

Status Dispatcher::matmul_shared(std::span<const Output> outs, const float* x, int n,
                                 const std::function<void(int)>& done) {
  if (n > 1) {
    for (size_t i = 0; i < outs.size(); ++i) {
      ORK_RETURN_IF_ERROR(matmul(*outs[i].w, x, n, outs[i].y));
      if (done) done(static_cast<int>(i));
    }
    return Status::ok();
  }
  std::vector<MatmulJob>& jobs = jobs_;
  jobs.clear();
  for (const Output& o : outs) jobs.push_back(make_job(*o.w, x, n, o.y));
  // The overlay's jobs for the i8s outputs, if the NPU is free: each is
  // needed when the CPU's loop has finished that output (the virtual
  // clock counts the loop's work up to it).
  JobSlots& slots = overlay_slots_;
  slots.reset(outs.size());
  int candidates = 0;
  for (const Output& o : outs) candidates += overlay_candidate(*o.w, n);
  double cpu_us = 0;
  if (candidates > 0 && !overlay_.npu_free(candidates)) {
    stats_.overlay_skipped += static_cast<uint64_t>(candidates);
    candidates = 0;
  }
  // Each is opened once the CPU has quantized its input, on the same codes.
  std::vector<double>& cpu_us_by = overlay_cpu_us_;
  cpu_us_by.assign(outs.size(), 0.0);
  std::vector<char>& open_it = overlay_open_;
  open_it.assign(outs.size(), 0);
  bool opening = false;
  int opened = 0;  // decided here, opened as the loop runs: their cost is not measured yet
  for (size_t i = 0; i < outs.size(); ++i) {
    cpu_us += overlay_.enabled() ? overlay_.cpu_us(*outs[i].w, jobs[i].i8s_high_only) : 0.0;
    cpu_us_by[i] = cpu_us;
    if (candidates > 0 && overlay_candidate(*outs[i].w, n)) {
      if (!overlay_.worth(*outs[i].w, cpu_us)) {
        ++stats_.overlay_skipped;
      } else if (!overlay_.affordable(opened)) {
        ++stats_.overlay_over_budget;
      } else {
        open_it[i] = 1;
        opening = true;
        ++opened;
      }
    }
  }
  // Opened while the engine's other threads start on the rows: an output
  // finished first is not given a job (its slot is closed).
  Status open_error;
  std::function<void(int, const QuantizedToken*)> input_ready;
  if (opening) {
    input_ready = [&](int i, const QuantizedToken* xq) {
      const auto u = static_cast<size_t>(i);
      if (!open_it[u] || !open_error.is_ok()) return;
      if (!slots.waiting(u)) {
        ++stats_.overlay_skipped;
        return;
      }
      Result<int> r = overlay_.open(*outs[u].w, x, outs[u].y, cpu_us_by[u], xq);
      if (!r.is_ok()) open_error = r.status();
      else if (*r >= 0) slots.publish(u, *r);
    };
  }
  // resolve(i) before the caller's follow-up of output i, on the thread
  // that finished it; the first device error is kept for the caller.
  std::atomic<bool> failed{false};
  Status first_error;
  std::function<void(int)> group_done;
  if (candidates > 0 || done) {
    group_done = [&](int i) {
      if (const int j = slots.take(static_cast<size_t>(i)); j >= 0) {
        Status s = overlay_.resolve(j);
        if (!s.is_ok() && !failed.exchange(true)) first_error = std::move(s);
      }
      if (done) done(i);
    };
  }
  ORK_ASSIGN_OR_RETURN(FencePtr f, cpu_->submit(MatmulBatch{jobs, 1, group_done, input_ready, overlay_.measuring()}));
  ORK_RETURN_IF_ERROR(Engine::wait(f));
  for (size_t i = 0; i < outs.size(); ++i) {
    ++stats_.decode[static_cast<size_t>(slots.opened(i) ? Route::kOverlay : Route::kCpu)];
    count_role(*outs[i].w, n);
  }
  ORK_RETURN_IF_ERROR(open_error);
  overlay_.finish(cpu_us);
  overlay_.add_counts(stats_);
  return failed ? first_error : Status::ok();
}

Result<bool> Dispatcher::experts(const ExpertsCall& call) {
  ExpertsJob job;
  job.gate = call.gate;
  job.up = call.up;
  job.down = call.down;
  job.ids = call.ids;
  job.weights = call.weights;
  job.n = call.n;
  job.k = call.k;
  job.n_embd = call.n_embd;
  job.n_ff = call.n_ff;
  job.x = call.x;
  job.acc = call.acc;
  job.present = call.present;
  job.await = call.await;
  job.i8s_high_only = call.n == 1 && (i8s_high_only_ || overlay_.enabled());
  if (!cpu_->fused_experts(job)) return false;
  if (call.n > 1) {
    // With an NPU, a batch's experts are routed one matmul at a time when
    // the model sends any of them away from the CPU (the caller's loop);
    // else the CPU's fused loop takes them all.
    if (npu_ != nullptr && options_.prefill) {
      std::vector<int> tokens(call.gate.size(), 0);
      for (int i = 0; i < call.n * call.k; ++i) ++tokens[static_cast<size_t>(call.ids[i])];
      for (size_t e = 0; e < tokens.size(); ++e) {
        if (tokens[e] == 0) continue;
        const MatmulOp op = MatmulOp::of(call.gate[e], tokens[e]);
        const PrefillChoice c = choose_prefill(model(), npu_, op, options_.split);
        if (c.route != Route::kCpu || (options_.force_prefill && *options_.force_prefill != Route::kCpu &&
                                       npu_->supports(op).ok)) {
          return false;
        }
      }
    }
    cpu_->run_experts(job);
    uint64_t active = 0;
    std::vector<bool> seen(call.gate.size(), false);
    for (int i = 0; i < call.n * call.k; ++i) {
      const auto e = static_cast<size_t>(call.ids[i]);
      active += !seen[e];
      seen[e] = true;
    }
    stats_.prefill[static_cast<size_t>(Route::kCpu)] += 3 * active;  // gate, up and down of each
    return true;
  }
  // Decode: the routed experts' i8s matrices are overlaid when the NPU is
  // free - gate and up from the token's input now, each down from its
  // input once the first loop has made it.
  const int k = call.k;
  const std::vector<int> order = expert_order(call.ids, k);
  auto expert_at = [&](int p) { return static_cast<size_t>(call.ids[order[static_cast<size_t>(p)]]); };
  int candidates = 0;
  for (int p = 0; p < k; ++p) {
    const size_t e = expert_at(p);
    candidates += overlay_candidate(call.gate[e], 1) + overlay_candidate(call.up[e], 1) + overlay_candidate(call.down[e], 1);
  }
  const bool overlay = candidates > 0 && overlay_.npu_free(candidates);
  if (candidates > 0 && !overlay) stats_.overlay_skipped += static_cast<uint64_t>(candidates);
  std::vector<int> gate_idx(static_cast<size_t>(k), -1), up_idx(static_cast<size_t>(k), -1);
  // The downs' jobs are opened while the engine's other threads start on
  // the downs: a down already done gets none.
  JobSlots& down_slots = overlay_slots_;
  down_slots.reset(static_cast<size_t>(k));
  // The CPU's modeled time through the first loop (to position p) and the second.
  double cpu_us = 0;
  auto cpu_time = [&](const WeightView& w) { return overlay_.cpu_us(w, job.i8s_high_only); };
  // An overlay job is opened only where it is predicted in time; into the
  // CPU's rows `y` when they are known (a hit's rows copied once, by the
  // fence), else into the overlay's own (copied over the CPU's on a hit).
  auto open_if_worth = [&](const WeightView& w, const float* in, float* y, int* idx,
                           const QuantizedToken* xq = nullptr) -> Status {
    if (!overlay_candidate(w, 1)) return Status::ok();
    if (!overlay_.worth(w, cpu_us)) {
      ++stats_.overlay_skipped;
      return Status::ok();
    }
    if (!overlay_.affordable()) {
      ++stats_.overlay_over_budget;
      return Status::ok();
    }
    if (y != nullptr) {
      ORK_ASSIGN_OR_RETURN(*idx, overlay_.open(w, in, y, cpu_us, xq));
    } else {
      ORK_ASSIGN_OR_RETURN(*idx, overlay_.open_deferred(w, in, cpu_us, xq));
    }
    return Status::ok();
  };
  std::atomic<bool> failed{false};
  Status first_error;
  auto keep = [&](Status s) {
    if (!s.is_ok() && !failed.exchange(true)) first_error = std::move(s);
  };
  if (overlay) {
    for (int p = 0; p < k; ++p) {
      const size_t e = expert_at(p);
      // The CPU engine's rows for position p are known when it resolves them.
      cpu_us += cpu_time(call.gate[e]);
      ORK_RETURN_IF_ERROR(open_if_worth(call.gate[e], call.x, nullptr, &gate_idx[static_cast<size_t>(p)]));
      cpu_us += cpu_time(call.up[e]);
      ORK_RETURN_IF_ERROR(open_if_worth(call.up[e], call.x, nullptr, &up_idx[static_cast<size_t>(p)]));
    }
    job.before_swiglu = [&](int p, float* gate, float* up) {
      keep(overlay_.resolve_into(gate_idx[static_cast<size_t>(p)], gate));
      keep(overlay_.resolve_into(up_idx[static_cast<size_t>(p)], up));
    };
    job.after_gate_up = [&](const float* down_inputs, const QuantizedToken* down_quantized, float* down_outputs) {
      if (call.after_gate_up) call.after_gate_up();
      overlay_.set_cpu_elapsed(cpu_us);  // the downs start after every gate and up
      for (int p = 0; p < k; ++p) {
        const size_t e = expert_at(p);
        const auto u = static_cast<size_t>(p);
        cpu_us += cpu_time(call.down[e]);
        if (!down_slots.waiting(u)) {
          stats_.overlay_skipped += overlay_candidate(call.down[e], 1) ? 1 : 0;
          continue;
        }
        int idx = -1;
        keep(open_if_worth(call.down[e], down_inputs + u * call.n_ff, down_outputs + u * call.n_embd, &idx,
                           &down_quantized[u]));
        if (idx >= 0) down_slots.publish(u, idx);
      }
    };
    job.after_gate_up_first = overlay_.measuring();
    job.before_sum = [&](int p, float*) { keep(overlay_.resolve(down_slots.take(static_cast<size_t>(p)))); };
  } else {
    if (call.after_gate_up) job.after_gate_up = [&](const float*, const QuantizedToken*, float*) { call.after_gate_up(); };
    for (int p = 0; p < k; ++p) {
      const size_t e = expert_at(p);
      cpu_us += cpu_time(call.gate[e]) + cpu_time(call.up[e]) + cpu_time(call.down[e]);
    }
  }
  cpu_->run_experts(job);
  for (int p = 0; p < k; ++p) {
    const auto u = static_cast<size_t>(p);
    for (bool opened : {gate_idx[u] >= 0, up_idx[u] >= 0, overlay && down_slots.opened(u)}) {
      ++stats_.decode[static_cast<size_t>(opened ? Route::kOverlay : Route::kCpu)];
    }
    const size_t e = expert_at(p);
    for (const WeightView* w : {&call.gate[e], &call.up[e], &call.down[e]}) count_role(*w, 1);
  }
  overlay_.finish(overlay_.enabled() ? cpu_us : 0.0);
  overlay_.add_counts(stats_);
  if (failed) return first_error;
  return true;
}

}  // namespace ork
