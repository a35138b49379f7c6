// The NPU engine's host side (DESIGN section 4): decides what the device
// can run from static properties, builds each op's KernelParams once (the
// program cache), quantizes activations on the host (per token: int8 for
// W8A8, int4 for W4A4) into pinned buffers, and submits to the device
// through its doorbell. The device side here is vnpu.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <vector>
#include <memory>
#include <string>
#include <tuple>

#include "engines/activations.h"
#include "engines/engine.h"
#include "engines/npu/vnpu.h"

namespace ork::npu {

// Parses "vnpu:PROFILE[:sessions=N][:window=MiB][:workers=N][:paced][:blocking][:timing]".
Result<VnpuOptions> parse_npu_spec(const std::string& spec);

class NpuEngine final : public Engine {
 public:
  static Result<std::unique_ptr<NpuEngine>> create(const VnpuOptions& o);
  ~NpuEngine() override;

  std::string name() const override;
  Support supports(const MatmulOp& op) const override;
  // The program cache: the KernelParams of an op (tiling, VTCM layout and
  // DMA descriptor lists), built on first use.
  Result<const KernelParams*> program(const MatmulOp& op);
  Status prepare(const MatmulOp& op) override {
    std::lock_guard lock(mu_);
    return program(op).status();
  }
  // Non-blocking: the input is brought into the weight's basis and
  // quantized for the datapath into a staging slot of its own, and the job
  // rung in. Up to max_in_flight() jobs may be outstanding; the device runs
  // them in order. The result reaches job.y when the fence is waited on -
  // never otherwise, so a caller that abandons a fence keeps its own y.
  Result<FencePtr> submit(const MatmulJob& job) override;
  // The device's modeled time for a job of this op (from the profile).
  double predict_us(const MatmulOp& op) const override;
  int in_flight() const override;
  int max_in_flight() const override { return kMaxSlots; }
  bool results_valid() const override;
  // Pins a caller's buffer (a KV cache) in every session's window.
  Status pin(const void* host, int64_t bytes) override { return dev_->pin(host, bytes); }
  void unpin(const void* host) override { dev_->unpin(host); }

  Vnpu& device() { return *dev_; }
  const DeviceProfile& profile() const { return dev_->options().profile; }

  struct Stats {
    uint64_t jobs = 0;
    uint64_t program_cache_entries = 0;
    double modeled_device_us = 0;  // modeled, from the profile
    double host_wall_us = 0;       // measured: submit to fence, for the jobs waited on
    uint64_t maps = 0, unmaps = 0, evictions = 0;
  };
  Stats stats() const;

  // Test hook: the next job fails in this session.
  void fail_next_job_in(int session) { fail_session_ = session; }

 private:
  explicit NpuEngine(std::unique_ptr<Vnpu> dev) : dev_(std::move(dev)) {}
  friend class NpuFence;
  // A pinned staging area (activations, scales, sums, output; 128-byte
  // aligned) that one job at a time owns.
  struct Slot {
    std::unique_ptr<uint8_t[], void (*)(uint8_t*)> mem{nullptr, [](uint8_t*) {}};
    int64_t cap_acts = 0, cap_scales = 0, cap_out = 0;
    int8_t* acts = nullptr;
    float* act_scales = nullptr;
    int32_t* act_sums = nullptr;
    float* out = nullptr;
    std::shared_ptr<JobState> job;
    std::atomic<bool> fence_alive{false};
  };
  static constexpr int kMaxSlots = 16;
  Result<Slot*> slot_for(int64_t m, int64_t k, int64_t n);
  void stage_acts(const MatmulJob& job, const KernelParams& p, Slot& slot);
  void release(Slot& s);

  std::unique_ptr<Vnpu> dev_;
  std::map<std::tuple<Tier, int64_t, int64_t, int64_t>, KernelParams> programs_;
  mutable std::map<std::tuple<Tier, int64_t, int64_t, int64_t, bool>, double> predictions_;  // under mu_
  std::deque<Slot> slots_;
  std::vector<float> basis_;  // the input in the weight's basis, before quantization
  RotationSigns signs_;
  int fail_session_ = -1;
  std::atomic<int64_t> host_wall_ns_{0};
  // Contexts on several threads may share the device: submissions (slots,
  // the program cache, staging) are serialized.
  mutable std::mutex mu_;
};

// The W4A4 activations: per token, ref::quantize_acts with codes in [-7, 7].
constexpr int kW4A4MaxCode = 7;

}  // namespace ork::npu
