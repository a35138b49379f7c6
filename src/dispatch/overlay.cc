#include "dispatch/overlay.h"

#include "dispatch/perf_model.h"

#include <algorithm>
#include <chrono>

namespace ork {

class Overlay::Charge {
 public:
  explicit Charge(Overlay* o) : o_(o->timed() ? o : nullptr) {
    if (o_ != nullptr) t0_ = std::chrono::steady_clock::now();
  }
  ~Charge() {
    if (o_ == nullptr) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
    o_->spent_ns_.fetch_add(ns, std::memory_order_relaxed);
  }
  Charge(const Charge&) = delete;
  Charge& operator=(const Charge&) = delete;

 private:
  Overlay* o_;
  std::chrono::steady_clock::time_point t0_;
};

void Overlay::configure(Engine* npu, const DispatchOptions& o, const PerfModel* model, double cpu_gbps) {
  npu_ = npu;
  options_ = o;
  jobs_.reserve(kMaxJobs);
  model_ = model;
  cpu_gbps_ = cpu_gbps > 0 ? cpu_gbps : 20.0;
  jobs_.clear();
  predicted_.clear();
  role_hits_.clear();
  cpu_now_us_ = npu_free_us_ = cpu_elapsed_us_ = 0;
  serial_ = 0;
  credit_us_ = kCreditUs;
  job_cost_us_ = 0;
  host_us_ = 0;
  spent_ns_ = 0;
  call_jobs_ = 0;
  last_finish_ = std::chrono::steady_clock::now();
}

bool Overlay::npu_free(int jobs) const {
  if (!enabled()) return false;
  // The measurement clocks decide by their own time, so that a hit rate
  // does not depend on this machine (every job is drained when resolved).
  if (options_.clock == OverlayClock::kVirtual) return npu_free_us_ <= cpu_now_us_;
  if (options_.clock == OverlayClock::kForced) return true;
  // The overlay runs only when the NPU is free: nothing of a previous token
  // (a miss still running) or of a prefill is in flight.
  return npu_->in_flight() == 0 && jobs <= std::min(options_.max_in_flight, npu_->max_in_flight());
}

double Overlay::cpu_us(const WeightView& w, bool i8s_high_only) const {
  const MatmulOp op = MatmulOp::of(w, 1);
  if (options_.clock != OverlayClock::kVirtual && model_ != nullptr) return model_->cpu_us(op, i8s_high_only);
  // The device's CPU streams the bytes it reads: for an i8s weight read by
  // its high plane, half a byte per weight; plus the row scales.
  const bool high = i8s_high_only && w.is_tier && w.tier == Tier::kI8s;
  const double bytes = high ? static_cast<double>(w.rows) * (static_cast<double>(w.k_stored) / 2.0 + 4.0)
                            : static_cast<double>(matrix_bytes(w));
  return bytes / (cpu_gbps_ * 1e3);
}

double Overlay::device_us(const WeightView& w) const {
  const MatmulOp op = MatmulOp::of(w, 1);
  for (const Predicted& p : predicted_) {
    if (p.op == op) return p.us;
  }
  const double us = npu_->predict_us(op);
  predicted_.push_back({op, us});
  return us;
}

bool Overlay::worth(const WeightView& w, double cpu_us_before) const {
  if (options_.clock == OverlayClock::kForced) return true;
  const double start = std::max(cpu_now_us_ + cpu_elapsed_us_, npu_free_us_);
  const double device = device_us(w);
  return device >= 0 && start + device <= cpu_now_us_ + cpu_us_before;
}

double Overlay::since_finish_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - last_finish_).count();
}

double Overlay::depth_us() const { return std::max(kCreditUs, 2 * job_cost_us_); }

bool Overlay::affordable(int planned) const {
  if (!budgeted()) return true;
  const double spent_us = static_cast<double>(spent_ns_.load(std::memory_order_relaxed)) / 1e3;
  const double credit = std::min(credit_us_ + options_.overlay_budget * since_finish_us(), depth_us());
  return credit - spent_us >= (planned + 1) * job_cost_us_;
}

bool Overlay::measuring() const { return options_.clock != OverlayClock::kWall; }

Result<int> Overlay::open(const WeightView& w, const float* x, float* cpu_y, double cpu_us_before,
                          const QuantizedToken* xq) {
  if (jobs_.size() == kMaxJobs) return -1;
  const Charge charge(this);
  return open_job(w, x, cpu_y, cpu_us_before, xq);
}

Result<int> Overlay::open_deferred(const WeightView& w, const float* x, double cpu_us_before,
                                   const QuantizedToken* xq) {
  if (jobs_.size() == kMaxJobs) return -1;
  const Charge charge(this);
  return open_deferred_job(w, x, cpu_us_before, xq);
}

Status Overlay::resolve(int i) {
  if (i < 0) return Status::ok();
  const Charge charge(this);
  return resolve_job(i);
}

Result<int> Overlay::open_deferred_job(const WeightView& w, const float* x, double cpu_us_before,
                                       const QuantizedToken* xq) {
  const size_t i = jobs_.size();
  if (buffers_.size() <= i) buffers_.resize(i + 1);
  buffers_[i].resize(static_cast<size_t>(w.rows));
  opening_deferred_ = true;
  Result<int> opened = open_job(w, x, buffers_[i].data(), cpu_us_before, xq);
  opening_deferred_ = false;
  ORK_ASSIGN_OR_RETURN(const int idx, std::move(opened));
  jobs_[static_cast<size_t>(idx)].buffer = &buffers_[i];
  return idx;
}

Status Overlay::resolve_into(int i, float* cpu_y) {
  if (i < 0) return Status::ok();
  const Charge charge(this);
  ORK_RETURN_IF_ERROR(resolve_job(i));
  const Job& j = jobs_[static_cast<size_t>(i)];
  if (j.took) take(*j.buffer, cpu_y);
  return Status::ok();
}

void Overlay::take(const std::vector<float>& rows, float* dst) {
  if (!npu_->results_valid()) {
    thread_local std::vector<float> sink;  // resolves run on several threads at once
    sink.resize(rows.size());
    dst = sink.data();
  }
  std::copy(rows.begin(), rows.end(), dst);
}

Result<int> Overlay::open_job(const WeightView& w, const float* x, float* cpu_y, double cpu_us_before,
                              const QuantizedToken* xq) {
  // The measurement clocks drain every job, hit or miss: the device writes
  // to the overlay's own rows, copied over the CPU's only on a hit. So does
  // a device that only keeps time, whose rows are never taken.
  if ((measuring() || !npu_->results_valid()) && !opening_deferred_) {
    ORK_ASSIGN_OR_RETURN(const int idx, open_deferred_job(w, x, cpu_us_before, xq));
    jobs_[static_cast<size_t>(idx)].cpu_y = cpu_y;
    return idx;
  }
  MatmulJob job;
  job.op = MatmulOp::of(w, 1);
  job.w = w;
  job.x = x;
  job.xq = xq;
  job.y = cpu_y;  // written only if the fence is waited on: a hit
  job.ldy = w.rows;
  ORK_ASSIGN_OR_RETURN(FencePtr fence, npu_->submit(job));
  Job& j = jobs_.emplace_back();
  j.fence = std::move(fence);
  const double start = std::max(cpu_now_us_ + cpu_elapsed_us_, npu_free_us_);
  const double device = device_us(w);
  j.npu_done_us = start + std::max(0.0, device);
  npu_free_us_ = j.npu_done_us;
  j.needed_us = cpu_now_us_ + cpu_us_before;
  j.serial = ++serial_;
  if (measuring()) {
    j.role = overlay_role(w.name);
    j.rate = options_.hit_rate;
    for (const auto& [role, rate] : options_.role_hit_rates) {
      if (role == j.role) j.rate = rate;
    }
  }
  ++call_jobs_;
  return static_cast<int>(jobs_.size()) - 1;
}

bool Overlay::hit(Job& j, uint64_t serial) const {
  switch (options_.clock) {
    case OverlayClock::kWall: return j.fence->done();
    case OverlayClock::kVirtual: return j.npu_done_us <= j.needed_us;
    case OverlayClock::kForced: {
      // splitmix64 of the job's serial: a fixed, evenly spread choice.
      uint64_t z = serial + 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      return static_cast<double>(z >> 11) * 0x1.0p-53 < j.rate;
    }
  }
  return false;
}

Status Overlay::resolve_job(int i) {
  Job& j = jobs_[static_cast<size_t>(i)];
  if (j.resolved) return Status::ok();
  j.resolved = true;
  if (!hit(j, j.serial)) {
    // Not ready: the CPU's int4 result stands, and the NPU's is dropped -
    // in wall-clock mode never waited on, so it never reaches the output;
    // a measurement clock drains it into the overlay's rows.
    misses_.fetch_add(1, std::memory_order_relaxed);
    if (measuring()) ORK_RETURN_IF_ERROR(j.fence->wait());
    return Status::ok();
  }
  // Ready (in wall-clock mode wait() returns at once): its rows replace the
  // CPU's, or the device's error surfaces.
  ORK_RETURN_IF_ERROR(j.fence->wait());
  j.took = true;
  hits_.fetch_add(1, std::memory_order_relaxed);
  // A job opened into the CPU's rows but drained into the overlay's: a
  // measurement clock's moves them over now. From a device that only keeps
  // time the fence's copy into the overlay's rows was the one copy such a
  // job makes on a real device (straight into the CPU's rows): none more.
  if (j.cpu_y != nullptr && npu_->results_valid()) take(*j.buffer, j.cpu_y);
  return Status::ok();
}

void Overlay::begin_step() {
  if (budgeted()) last_finish_ = std::chrono::steady_clock::now();
}

void Overlay::end_step() {
  if (!budgeted()) return;
  credit_us_ = std::min(credit_us_ + options_.overlay_budget * since_finish_us(), depth_us());
  last_finish_ = std::chrono::steady_clock::now();
}

void Overlay::finish(double cpu_us) {
  cpu_now_us_ += cpu_us;
  cpu_elapsed_us_ = 0;
  // A call that opened nothing has nothing to end and has spent nothing:
  // the budget's earnings since the last call that did are counted when
  // the next one does (affordable() caps them at the bucket's depth).
  // Most calls of a token are such, and the clock is not read for them.
  if (jobs_.empty()) return;
  for (Job& j : jobs_) {
    if (j.took && measuring()) {
      auto it = std::find_if(role_hits_.begin(), role_hits_.end(), [&](const OverlayRoleCount& r) { return r.role == j.role; });
      if (it == role_hits_.end()) it = role_hits_.insert(it, OverlayRoleCount{std::string(j.role)});
      ++it->hits;
    }
    if (j.resolved) continue;
    misses_.fetch_add(1, std::memory_order_relaxed);
    if (measuring()) (void)j.fence->wait();
  }
  jobs_.clear();
  if (timed()) {
    // The time decode took since the last call ended earns its share; the
    // overlay's host time in it is spent. A job's cost is learned from the
    // calls that opened any, from 0 up: a first job's one-time costs (its
    // program built, its slot pinned) do not stop the next ones - the
    // bucket is charged what they really took either way.
    const double spent_us = static_cast<double>(spent_ns_.exchange(0, std::memory_order_relaxed)) / 1e3;
    host_us_ += spent_us;
    if (budgeted()) {
      if (call_jobs_ > 0) job_cost_us_ = 0.9 * job_cost_us_ + 0.1 * spent_us / call_jobs_;
      credit_us_ = std::min(credit_us_ + options_.overlay_budget * since_finish_us(), depth_us()) - spent_us;
      last_finish_ = std::chrono::steady_clock::now();
    }
  }
  call_jobs_ = 0;
}

void Overlay::add_counts(DispatchStats& s) {
  // Read before the exchange: most calls have nothing to count.
  if (hits_.load(std::memory_order_relaxed) != 0) s.overlay_hits += hits_.exchange(0);
  if (misses_.load(std::memory_order_relaxed) != 0) s.overlay_misses += misses_.exchange(0);
  for (OverlayRoleCount& r : role_hits_) {
    s.role(r.role).hits += r.hits;
    r.hits = 0;
  }
  s.overlay_host_us += host_us_;
  host_us_ = 0;
}

}  // namespace ork
