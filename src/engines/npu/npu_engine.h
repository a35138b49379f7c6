// The NPU engine's host side (DESIGN section 4): decides what the device
// can run from static properties, builds each op's KernelParams once (the
// program cache), quantizes activations on the host (per token: int8 for
// W8A8, int4 for W4A4) into pinned buffers, and submits to the device
// through its doorbell. The device side here is vnpu.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "engines/engine.h"
#include "engines/npu/vnpu.h"

namespace ork::npu {

// Parses "vnpu:PROFILE[:sessions=N][:window=MiB][:workers=N][:paced][:blocking]".
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
  Status prepare(const MatmulOp& op) override { return program(op).status(); }
  // One job in flight at a time: a submit waits for the previous job.
  Result<FencePtr> submit(const MatmulJob& job) override;

  Vnpu& device() { return *dev_; }
  // Pins a caller's buffer (a KV cache) in every session's window.
  Status pin(const void* host, int64_t bytes) { return dev_->pin(host, bytes); }
  void unpin(const void* host) { dev_->unpin(host); }

  struct Stats {
    uint64_t jobs = 0;
    uint64_t program_cache_entries = 0;
    double modeled_device_us = 0;  // modeled, from the profile
    double host_wall_us = 0;       // measured: submit to fence
    uint64_t maps = 0, unmaps = 0, evictions = 0;
  };
  Stats stats() const;

  // Test hook: the next job fails in this session.
  void fail_next_job_in(int session) { fail_session_ = session; }

 private:
  explicit NpuEngine(std::unique_ptr<Vnpu> dev) : dev_(std::move(dev)) {}
  Status stage(int64_t m, int64_t k, int64_t n);
  friend class NpuFence;

  std::unique_ptr<Vnpu> dev_;
  std::map<std::tuple<Tier, int64_t, int64_t, int64_t>, KernelParams> programs_;
  // Pinned staging: activations (int8 codes, scales, sums) and the output,
  // 128-byte aligned.
  struct Aligned {
    void operator()(void* p) const { ::operator delete[](p, std::align_val_t(kLineBytes)); }
  };
  std::unique_ptr<uint8_t[], Aligned> staging_;
  int64_t cap_acts_ = 0, cap_scales_ = 0, cap_out_ = 0;
  int8_t* acts_ = nullptr;
  float* act_scales_ = nullptr;
  int32_t* act_sums_ = nullptr;
  float* out_ = nullptr;
  FencePtr in_flight_;
  int fail_session_ = -1;
  double host_wall_us_ = 0;
};

// The W4A4 activations: per token, ref::quantize_acts with codes in [-7, 7].
constexpr int kW4A4MaxCode = 7;

}  // namespace ork::npu
