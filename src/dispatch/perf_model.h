// The dispatcher's performance model: the predicted time of a matmul on
// each engine.
//   CPU  calibrated by a short measurement (`ork calibrate`, a few seconds):
//        for every kernel kind, the time per stored weight at M = 1 (a
//        matrix far larger than the caches: decode reads from DRAM) and at
//        M = 4, 16, 64, 256 (compute-bound GEMM), interpolated in log M.
//        Cached on disk per machine, thread count and binary, and measured
//        again when one of them changes.
//   NPU  the engine's own prediction from its device profile
//        (Engine::predict_us), plus the host's share of a job (quantizing
//        and submitting, polling, copying the result back), measured at
//        calibration.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "engines/engine.h"
#include "ork/status.h"

namespace ork {

class ThreadPool;

// The kernels whose speed differs (tiers, and the GGUF matrices the CPU
// reads directly).
enum class KernelKind { kI4, kNf4, kI5, kI6, kI8, kI8s, kF16, kBf16, kF32, kReference, kKinds };
inline constexpr int kKernelKinds = static_cast<int>(KernelKind::kKinds);
const char* kernel_kind_name(KernelKind k);
// Which kernel a matmul runs on the CPU (an i8s weight read from its high
// plane runs the i4 kernel).
KernelKind kernel_kind(const MatmulOp& op, bool i8s_high_only);

inline constexpr std::array<int, 5> kCalibrationM = {1, 4, 16, 64, 256};

class PerfModel {
 public:
  // Rates that are right in order of magnitude for a 2-core x86 of this
  // decade, for when nothing was measured (tests, a first run without a
  // cache). `calibrated()` says which a model is.
  static PerfModel defaults(int threads);
  // Measures the CPU on `pool` (and the NPU's host overheads): a few
  // seconds. progress(done, total) if given.
  static Result<PerfModel> calibrate(ThreadPool& pool, const std::function<void(int, int)>& progress = nullptr);
  // The cache entry for this machine, thread count and binary.
  static std::string cache_path(int threads);
  // The cached model if there is one for this machine, threads and binary,
  // else a fresh calibration, saved (a cache that cannot be written is a
  // warning in `*note`, not an error).
  static Result<PerfModel> cached_or_calibrate(ThreadPool& pool, std::string* note,
                                               const std::function<void(int, int)>& progress = nullptr);
  static Result<PerfModel> load(const std::string& path);
  Status save(const std::string& path) const;

  // Predicted microseconds of a matmul on the CPU.
  double cpu_us(const MatmulOp& op, bool i8s_high_only = false) const;
  // On the NPU: the device's modeled time and the host's share; < 0 when
  // the engine makes no prediction.
  double npu_us(const Engine& npu, const MatmulOp& op) const;
  // The host's part of one NPU job (not overlapped with the device).
  double npu_host_us(const MatmulOp& op) const;

  bool calibrated() const { return calibrated_; }
  int threads() const { return threads_; }
  const std::string& machine() const { return machine_; }
  // ns per stored weight of a kernel at calibration M index i.
  double ns_per_weight(KernelKind k, size_t i) const { return ns_[static_cast<size_t>(k)][i]; }
  // Per kernel, GB/s of stored weight at M = 1 and GMAC/s at each M.
  std::string describe() const;
  std::string json() const;

 private:
  bool calibrated_ = false;
  int threads_ = 1;
  std::string machine_, binary_;
  double seconds_ = 0;  // how long the calibration took
  std::array<std::array<double, kCalibrationM.size()>, kKernelKinds> ns_{};
  double call_us_ = 2.0;  // a parallel loop's fixed cost
  // The NPU's host side: per job, and per byte of activations and result.
  double npu_submit_us_ = 10.0, npu_poll_us_ = 0.2, npu_copy_gbps_ = 10.0;
};

}  // namespace ork
