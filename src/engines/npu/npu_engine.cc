#include "engines/npu/npu_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_matmul.h"
#include "kernels/ref/quant_matmul.h"

namespace ork::npu {
namespace {

int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

std::optional<Datapath> datapath_of(Tier tier) {
  if (tier == Tier::kI8 || tier == Tier::kI8s || tier == Tier::kNf4) return Datapath::kW8A8;
  if (tier == Tier::kI4) return Datapath::kW4A4;
  return std::nullopt;
}

CodeKind kind_of(Tier tier) {
  switch (tier) {
    case Tier::kI4: return CodeKind::kI4;
    case Tier::kI8s: return CodeKind::kI8s;
    case Tier::kNf4: return CodeKind::kNf4;
    default: return CodeKind::kI8;
  }
}

}  // namespace

Result<VnpuOptions> parse_npu_spec(const std::string& spec) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (true) {
    const size_t colon = spec.find(':', at);
    parts.push_back(spec.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  if (parts.size() < 2 || parts[0] != "vnpu") {
    return error(StatusCode::kInvalidArgument, "--npu '{}': expected vnpu:PROFILE[:sessions=N][:window=MiB][:workers=N][:paced][:blocking][:timing]",
                 spec);
  }
  VnpuOptions o;
  ORK_ASSIGN_OR_RETURN(o.profile, find_profile(parts[1]));
  for (size_t i = 2; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    const size_t eq = p.find('=');
    const std::string key = p.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : p.substr(eq + 1);
    auto number = [&]() -> Result<int64_t> {
      char* end = nullptr;
      const long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 1) {
        return error(StatusCode::kInvalidArgument, "--npu '{}': '{}' needs a positive integer", spec, key);
      }
      return static_cast<int64_t>(v);
    };
    if (key == "sessions") {
      ORK_ASSIGN_OR_RETURN(const int64_t v, number());
      o.sessions = static_cast<int>(v);
    } else if (key == "window") {
      ORK_ASSIGN_OR_RETURN(const int64_t v, number());
      o.window_bytes = v << 20;
    } else if (key == "workers") {
      ORK_ASSIGN_OR_RETURN(const int64_t v, number());
      o.workers = static_cast<int>(v);
    } else if (key == "paced" && value.empty()) {
      o.paced = true;
    } else if (key == "blocking" && value.empty()) {
      o.doorbell = false;
    } else if (key == "timing" && value.empty()) {
      o.compute = false;
    } else {
      return error(StatusCode::kInvalidArgument, "--npu '{}': unknown option '{}'", spec, p);
    }
  }
  return o;
}

class NpuFence final : public Fence {
 public:
  NpuFence(NpuEngine* e, NpuEngine::Slot* slot, float* y, int64_t ldy, int64_t m, int64_t row_begin, int64_t n,
           std::chrono::steady_clock::time_point t0)
      : e_(e), slot_(slot), js_(slot->job), y_(y), ldy_(ldy), m_(m), row_begin_(row_begin), n_(n), t0_(t0) {}
  ~NpuFence() override { slot_->fence_alive.store(false, std::memory_order_release); }
  bool done() const override { return e_->dev_->done(*js_); }
  Status wait() override {
    if (finished_) return status_;
    status_ = e_->dev_->wait(*js_);
    if (status_.is_ok()) {
      for (int64_t t = 0; t < m_; ++t) {
        std::memcpy(y_ + t * ldy_ + row_begin_, slot_->out + t * n_, static_cast<size_t>(n_) * 4);
      }
    }
    e_->host_wall_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
    finished_ = true;
    return status_;
  }

 private:
  NpuEngine* e_;
  NpuEngine::Slot* slot_;
  std::shared_ptr<JobState> js_;
  float* y_;
  int64_t ldy_, m_, row_begin_, n_;
  std::chrono::steady_clock::time_point t0_;
  bool finished_ = false;
  Status status_;
};

Result<std::unique_ptr<NpuEngine>> NpuEngine::create(const VnpuOptions& o) {
  ORK_ASSIGN_OR_RETURN(std::unique_ptr<Vnpu> dev, Vnpu::create(o));
  return std::unique_ptr<NpuEngine>(new NpuEngine(std::move(dev)));
}

NpuEngine::~NpuEngine() {
  for (Slot& s : slots_) {
    if (s.job) (void)dev_->wait(*s.job);
    release(s);
  }
  dev_.reset();
}

void NpuEngine::release(Slot& s) {
  if (!s.mem) return;
  for (const void* p : {static_cast<const void*>(s.acts), static_cast<const void*>(s.act_scales),
                        static_cast<const void*>(s.act_sums), static_cast<const void*>(s.out)}) {
    dev_->unpin(p);
  }
  s.mem.reset();
}

std::string NpuEngine::name() const {
  return fmt::format("vnpu:{}x{}{}", dev_->options().profile.name, dev_->sessions(),
                     dev_->options().compute ? "" : " (timing only)");
}

Support NpuEngine::supports(const MatmulOp& op) const {
  if (!op.is_tier) return Support::no("a GGUF matrix: the NPU reads orkpack tiers");
  const std::optional<Datapath> dp = datapath_of(op.tier);
  if (!dp) {
    return Support::no(fmt::format("tier {} has no vnpu datapath (W8A8 reads i8, i8s and nf4, W4A4 reads i4)",
                                   tier_name(op.tier)));
  }
  auto p = make_kernel_params(kind_of(op.tier), *dp, op.m, op.k, op.n, dev_->options().profile.vtcm_bytes,
                              /*with_descriptors=*/false);
  if (!p.is_ok()) return Support::no(p.status().message());
  return Support::yes();
}

Result<const KernelParams*> NpuEngine::program(const MatmulOp& op) {
  const auto key = std::make_tuple(op.tier, op.m, op.k, op.n);
  if (const auto it = programs_.find(key); it != programs_.end()) return &it->second;
  const std::optional<Datapath> dp = datapath_of(op.tier);
  if (!dp || !op.is_tier) return error(StatusCode::kUnsupported, "{}: {}", name(), supports(op).why);
  ORK_ASSIGN_OR_RETURN(KernelParams p, make_kernel_params(kind_of(op.tier), *dp, op.m, op.k, op.n,
                                                          dev_->options().profile.vtcm_bytes));
  return &programs_.emplace(key, p).first->second;
}

double NpuEngine::predict_us(const MatmulOp& op) const {
  // A prediction depends on the op alone: made once per shape (the
  // overlay asks for one at every decode step).
  const auto key = std::make_tuple(op.is_tier ? op.tier : Tier::kF32, op.m, op.k, op.n, op.is_tier);
  std::lock_guard lock(mu_);
  if (const auto it = predictions_.find(key); it != predictions_.end()) return it->second;
  double us = -1.0;
  if (supports(op).ok) {
    auto p = make_kernel_params(kind_of(op.tier), *datapath_of(op.tier), op.m, op.k, op.n,
                                dev_->options().profile.vtcm_bytes, /*with_descriptors=*/false);
    if (p.is_ok()) us = dev_->predict_us(*p);
  }
  predictions_.emplace(key, us);
  return us;
}

int NpuEngine::in_flight() const {
  if (dev_->idle()) return 0;
  std::lock_guard lock(mu_);
  int n = 0;
  for (const Slot& s : slots_) n += s.job && !dev_->done(*s.job);
  return n;
}

// A slot whose last job is finished and whose fence is gone, grown to hold
// m x k activations and m x n outputs; a new one while there are fewer
// than kMaxSlots; else an error (the caller asked more of the device than
// it holds).
Result<NpuEngine::Slot*> NpuEngine::slot_for(int64_t m, int64_t k, int64_t n) {
  const int64_t a = align_up(m * k, kLineBytes), sc = align_up(4 * m, kLineBytes), o = align_up(4 * m * n, kLineBytes);
  Slot* free = nullptr;
  for (Slot& s : slots_) {
    if (s.fence_alive.load(std::memory_order_acquire) || (s.job && s.job->remaining.load() != 0)) continue;
    free = &s;
    if (s.mem && a <= s.cap_acts && sc <= s.cap_scales && o <= s.cap_out) return free;
  }
  if (free == nullptr) {
    if (static_cast<int>(slots_.size()) >= kMaxSlots) {
      return error(StatusCode::kResourceExhausted, "{}: {} jobs in flight, the most it holds", name(), kMaxSlots);
    }
    free = &slots_.emplace_back();
  }
  Slot& s = *free;
  release(s);
  // Room for twice what is asked, so a growing batch does not re-pin each time.
  s.cap_acts = std::max(s.cap_acts, 2 * a);
  s.cap_scales = std::max(s.cap_scales, 2 * sc);
  s.cap_out = std::max(s.cap_out, 2 * o);
  const int64_t bytes = s.cap_acts + 2 * s.cap_scales + s.cap_out;
  s.mem = {static_cast<uint8_t*>(::operator new[](static_cast<size_t>(bytes), std::align_val_t(kLineBytes))),
           [](uint8_t* p) { ::operator delete[](p, std::align_val_t(kLineBytes)); }};
  std::memset(s.mem.get(), 0, static_cast<size_t>(bytes));
  s.acts = reinterpret_cast<int8_t*>(s.mem.get());
  s.act_scales = reinterpret_cast<float*>(s.mem.get() + s.cap_acts);
  s.act_sums = reinterpret_cast<int32_t*>(s.mem.get() + s.cap_acts + s.cap_scales);
  s.out = reinterpret_cast<float*>(s.mem.get() + s.cap_acts + 2 * s.cap_scales);
  ORK_RETURN_IF_ERROR(dev_->pin(s.acts, s.cap_acts));
  ORK_RETURN_IF_ERROR(dev_->pin(s.act_scales, s.cap_scales));
  ORK_RETURN_IF_ERROR(dev_->pin(s.act_sums, s.cap_scales));
  ORK_RETURN_IF_ERROR(dev_->pin(s.out, s.cap_out));
  return &s;
}

// The host side brings the input into the weight's stored basis and
// quantizes it per token for the datapath, into the slot.
void NpuEngine::stage_acts(const MatmulJob& job, const KernelParams& p, Slot& slot) {
  const WeightView& w = job.w;
  const auto m = static_cast<int>(p.m);
  const float* x = job.x;
  if (!job.x_in_basis) {
    basis_.resize(static_cast<size_t>(m * p.k));
    const float* signs = w.rotation_block > 0 ? signs_.get(w.k_stored, w.rotation_seed) : nullptr;
    pad_rotate_quantize(job.x, m, w.cols, p.k, w.rotation_block, signs, basis_.data(), nullptr, nullptr, nullptr);
    x = basis_.data();
  }
  if (p.datapath == Datapath::kW8A8) {
    cpu::quantize_acts(x, m, p.k, slot.acts, slot.act_scales, slot.act_sums);
  } else {
    ref::quantize_acts(x, m, p.k, slot.acts, slot.act_scales, slot.act_sums, kW4A4MaxCode);
  }
}

Result<FencePtr> NpuEngine::submit(const MatmulJob& job) {
  std::lock_guard lock(mu_);
  const WeightView& w = job.w;
  const int64_t first = job.row_begin, rows = job.rows_end() - job.row_begin;
  MatmulOp op = job.op;
  op.n = rows;
  ORK_ASSIGN_OR_RETURN(const KernelParams* p, program(op));
  const auto t0 = std::chrono::steady_clock::now();
  ORK_ASSIGN_OR_RETURN(Slot * slot, slot_for(op.m, op.k, op.n));
  if (job.xq != nullptr && job.xq->codes != nullptr && op.m == 1 && job.xq->k == op.k &&
      p->datapath == Datapath::kW8A8) {
    // The CPU's codes of this input in this basis: what stage_acts would
    // make of x (the same pad, rotation and per-token int8), copied into
    // the staging slot rather than made again.
    std::memcpy(slot->acts, job.xq->codes, static_cast<size_t>(op.k));
    slot->act_scales[0] = job.xq->scale;
    slot->act_sums[0] = job.xq->sum;
  } else {
    stage_acts(job, *p, *slot);
  }
  // The device reads both planes of an i8s weight: its datapath is W8A8.
  const QuantWeights qw = quant_weights(w.tier_tensor(), false);
  DeviceJob dj;
  dj.p = p;
  dj.w0 = qw.p0 + first * plane0_row_bytes(qw.kind, qw.k);
  dj.w1 = qw.p1 != nullptr ? qw.p1 + first * plane1_row_bytes(qw.kind, qw.k) : nullptr;
  dj.w_scales = qw.scales + first;
  dj.scale_mul = qw.scale_mul;
  dj.acts = slot->acts;
  dj.act_scales = slot->act_scales;
  dj.act_sums = slot->act_sums;
  dj.out = slot->out;
  dj.fail_session = fail_session_;
  fail_session_ = -1;
  slot->job = dev_->submit(dj, std::move(slot->job));
  slot->fence_alive.store(true, std::memory_order_release);
  return FencePtr(std::make_shared<NpuFence>(this, slot, job.y, job.ldy, op.m, first, op.n, t0));
}

bool NpuEngine::results_valid() const { return dev_->options().compute; }

NpuEngine::Stats NpuEngine::stats() const {
  Stats s;
  const Vnpu::Totals t = dev_->totals();
  s.jobs = t.jobs;
  s.modeled_device_us = t.modeled_us;
  s.host_wall_us = static_cast<double>(host_wall_ns_.load()) / 1e3;
  s.program_cache_entries = programs_.size();
  for (int i = 0; i < dev_->sessions(); ++i) {
    const AddressWindow::Stats w = dev_->session(i).window().stats();
    s.maps += w.maps;
    s.unmaps += w.unmaps;
    s.evictions += w.evictions;
  }
  return s;
}

}  // namespace ork::npu
