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
  if (tier == Tier::kI8 || tier == Tier::kI8s) return Datapath::kW8A8;
  if (tier == Tier::kI4) return Datapath::kW4A4;
  return std::nullopt;
}

CodeKind kind_of(Tier tier) {
  return tier == Tier::kI4 ? CodeKind::kI4 : tier == Tier::kI8s ? CodeKind::kI8s : CodeKind::kI8;
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
    return error(StatusCode::kInvalidArgument, "--npu '{}': expected vnpu:PROFILE[:sessions=N][:window=MiB][:workers=N][:paced][:blocking]",
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
    } else {
      return error(StatusCode::kInvalidArgument, "--npu '{}': unknown option '{}'", spec, p);
    }
  }
  return o;
}

class NpuFence final : public Fence {
 public:
  NpuFence(NpuEngine* e, std::shared_ptr<JobState> js, float* y, int64_t ldy, int64_t m, int64_t n,
           std::chrono::steady_clock::time_point t0)
      : e_(e), js_(std::move(js)), y_(y), ldy_(ldy), m_(m), n_(n), t0_(t0) {}
  bool done() const override { return e_->dev_->done(*js_); }
  Status wait() override {
    if (finished_) return status_;
    status_ = e_->dev_->wait(*js_);
    if (status_.is_ok()) {
      for (int64_t t = 0; t < m_; ++t) std::memcpy(y_ + t * ldy_, e_->out_ + t * n_, static_cast<size_t>(n_) * 4);
    }
    e_->host_wall_us_ += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
    finished_ = true;
    return status_;
  }

 private:
  NpuEngine* e_;
  std::shared_ptr<JobState> js_;
  float* y_;
  int64_t ldy_, m_, n_;
  std::chrono::steady_clock::time_point t0_;
  bool finished_ = false;
  Status status_;
};

Result<std::unique_ptr<NpuEngine>> NpuEngine::create(const VnpuOptions& o) {
  ORK_ASSIGN_OR_RETURN(std::unique_ptr<Vnpu> dev, Vnpu::create(o));
  return std::unique_ptr<NpuEngine>(new NpuEngine(std::move(dev)));
}

NpuEngine::~NpuEngine() {
  if (in_flight_) (void)in_flight_->wait();
  if (staging_) {
    for (const void* p : {static_cast<const void*>(acts_), static_cast<const void*>(act_scales_),
                          static_cast<const void*>(act_sums_), static_cast<const void*>(out_)}) {
      dev_->unpin(p);
    }
  }
  dev_.reset();
}

std::string NpuEngine::name() const {
  return fmt::format("vnpu:{}x{}", dev_->options().profile.name, dev_->sessions());
}

Support NpuEngine::supports(const MatmulOp& op) const {
  const std::optional<Datapath> dp = datapath_of(op.tier);
  if (!dp) {
    return Support::no(fmt::format("tier {} has no vnpu datapath (W8A8 reads i8 and i8s, W4A4 reads i4)", tier_name(op.tier)));
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
  if (!dp) return error(StatusCode::kUnsupported, "{}: {}", name(), supports(op).why);
  ORK_ASSIGN_OR_RETURN(KernelParams p, make_kernel_params(kind_of(op.tier), *dp, op.m, op.k, op.n,
                                                          dev_->options().profile.vtcm_bytes));
  return &programs_.emplace(key, p).first->second;
}

// Grows the pinned staging buffers to hold m x k activations and m x n outputs.
Status NpuEngine::stage(int64_t m, int64_t k, int64_t n) {
  const int64_t a = align_up(m * k, kLineBytes), s = align_up(4 * m, kLineBytes), o = align_up(4 * m * n, kLineBytes);
  if (staging_ && a <= cap_acts_ && s <= cap_scales_ && o <= cap_out_) return Status::ok();
  if (staging_) {
    for (const void* p : {static_cast<const void*>(acts_), static_cast<const void*>(act_scales_),
                          static_cast<const void*>(act_sums_), static_cast<const void*>(out_)}) {
      dev_->unpin(p);
    }
  }
  // Room for twice what is asked, so a growing batch does not re-pin each time.
  cap_acts_ = std::max(cap_acts_, 2 * a);
  cap_scales_ = std::max(cap_scales_, 2 * s);
  cap_out_ = std::max(cap_out_, 2 * o);
  const int64_t bytes = cap_acts_ + 2 * cap_scales_ + cap_out_;
  staging_.reset(static_cast<uint8_t*>(::operator new[](static_cast<size_t>(bytes), std::align_val_t(kLineBytes))));
  acts_ = reinterpret_cast<int8_t*>(staging_.get());
  act_scales_ = reinterpret_cast<float*>(staging_.get() + cap_acts_);
  act_sums_ = reinterpret_cast<int32_t*>(staging_.get() + cap_acts_ + cap_scales_);
  out_ = reinterpret_cast<float*>(staging_.get() + cap_acts_ + 2 * cap_scales_);
  ORK_RETURN_IF_ERROR(dev_->pin(acts_, cap_acts_));
  ORK_RETURN_IF_ERROR(dev_->pin(act_scales_, cap_scales_));
  ORK_RETURN_IF_ERROR(dev_->pin(act_sums_, cap_scales_));
  return dev_->pin(out_, cap_out_);
}

Result<FencePtr> NpuEngine::submit(const MatmulJob& job) {
  if (in_flight_) {
    (void)in_flight_->wait();
    in_flight_.reset();
  }
  const MatmulOp& op = job.op;
  ORK_ASSIGN_OR_RETURN(const KernelParams* p, program(op));
  const auto t0 = std::chrono::steady_clock::now();
  ORK_RETURN_IF_ERROR(stage(op.m, op.k, op.n));
  const auto m = static_cast<int>(op.m);
  if (p->datapath == Datapath::kW8A8) {
    cpu::quantize_acts(job.x, m, op.k, acts_, act_scales_, act_sums_);
  } else {
    ref::quantize_acts(job.x, m, op.k, acts_, act_scales_, act_sums_, kW4A4MaxCode);
  }
  const QuantWeights w = quant_weights(job.w, false);
  DeviceJob dj;
  dj.p = p;
  dj.w0 = w.p0;
  dj.w1 = w.p1;
  dj.w_scales = w.scales;
  dj.scale_mul = w.scale_mul;
  dj.acts = acts_;
  dj.act_scales = act_scales_;
  dj.act_sums = act_sums_;
  dj.out = out_;
  dj.fail_session = fail_session_;
  fail_session_ = -1;
  in_flight_ = std::make_shared<NpuFence>(this, dev_->submit(dj), job.y, job.ldy, op.m, op.n, t0);
  return in_flight_;
}

NpuEngine::Stats NpuEngine::stats() const {
  Stats s;
  const Vnpu::Totals t = dev_->totals();
  s.jobs = t.jobs;
  s.modeled_device_us = t.modeled_us;
  s.host_wall_us = host_wall_us_;
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
