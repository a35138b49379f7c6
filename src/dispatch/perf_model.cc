#include "dispatch/perf_model.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>
#include <cstring>

#include "core/cache_dir.h"
#include "core/half.h"
#include "core/output_file.h"
#include "core/thread_pool.h"
#include "engines/cpu/cpu_engine.h"
#include "engines/npu/npu_engine.h"

namespace ork {
namespace {

constexpr int kFormatVersion = 1;

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What identifies this machine's CPU: the model name and flags, and the
// number of cores (the cache is per thread count as well).
std::string machine_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    if (model.empty() && (line.rfind("model name", 0) == 0 || line.rfind("CPU part", 0) == 0)) {
      model = line.substr(line.find(':') + 2);
    }
    if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0)) {
      flags = line.substr(line.find(':') + 2);
    }
  }
  return fmt::format("{} | {} cores | flags {:016x}", model.empty() ? "unknown CPU" : model,
                     std::thread::hardware_concurrency(), std::hash<std::string>{}(flags));
}

// What identifies this binary: its size and modification time.
std::string binary_identity() {
  struct stat st {};
  if (::stat("/proc/self/exe", &st) != 0) return "unknown binary";
  return fmt::format("{} bytes, mtime {}", static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtime));
}

Tier tier_of(KernelKind k) {
  switch (k) {
    case KernelKind::kI4: return Tier::kI4;
    case KernelKind::kNf4: return Tier::kNf4;
    case KernelKind::kI5: return Tier::kI5;
    case KernelKind::kI6: return Tier::kI6;
    case KernelKind::kI8: return Tier::kI8;
    case KernelKind::kI8s: return Tier::kI8s;
    case KernelKind::kF16: return Tier::kF16;
    case KernelKind::kBf16: return Tier::kBf16;
    case KernelKind::kF32: return Tier::kF32;
    default: return Tier::kF32;
  }
}

// A weight of `rows` x `k` at a kernel's kind, filled so every kernel does
// its real work (float weights small and finite: no denormals, no NaN).
struct SynthWeight {
  std::vector<uint8_t> data;
  std::vector<float> scales;
  WeightView view;
};

SynthWeight synth_weight(KernelKind kind, int64_t rows, int64_t k, std::mt19937& rng) {
  SynthWeight s;
  WeightView& v = s.view;
  v.cols = k;
  v.rows = rows;
  if (kind == KernelKind::kReference) {
    // A block-quantized GGUF matrix: Q4_0, 18 bytes per 32 weights.
    v.type = GgmlType::kQ4_0;
    v.row_bytes = static_cast<uint64_t>(k / 32 * 18);
    s.data.resize(v.row_bytes * static_cast<uint64_t>(rows));
    for (size_t i = 0; i < s.data.size(); ++i) s.data[i] = static_cast<uint8_t>(rng());
    for (int64_t b = 0; b < rows * k / 32; ++b) {  // a small finite f16 scale per block
      const uint16_t d = f32_to_f16(0.01f);
      std::memcpy(&s.data[static_cast<size_t>(b) * 18], &d, 2);
    }
    v.data = s.data.data();
    return s;
  }
  const Tier tier = tier_of(kind);
  v.is_tier = true;
  v.tier = tier;
  v.k_stored = k;
  s.data.resize(tier_data_bytes(tier, rows, k));
  if (float_tier(tier)) {
    // One row of small finite values (no denormals, no NaN), repeated.
    const size_t elem = tier == Tier::kF32 ? 4 : 2;
    const size_t row_bytes = static_cast<size_t>(k) * elem;
    for (size_t i = 0; i < static_cast<size_t>(k); ++i) {
      const float f = 0.01f * static_cast<float>(static_cast<int>(rng() % 201) - 100);
      if (tier == Tier::kF32) {
        std::memcpy(&s.data[i * 4], &f, 4);
      } else {
        const uint16_t h = tier == Tier::kF16 ? f32_to_f16(f) : f32_to_bf16(f);
        std::memcpy(&s.data[i * 2], &h, 2);
      }
    }
    for (int64_t r = 1; r < rows; ++r) std::memcpy(&s.data[static_cast<size_t>(r) * row_bytes], s.data.data(), row_bytes);
  } else {
    // Codes are read, not judged: any bytes do (filled a word at a time).
    uint64_t state = rng() | 1;
    for (size_t i = 0; i + 8 <= s.data.size(); i += 8) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      std::memcpy(&s.data[i], &state, 8);
    }
    s.scales.assign(static_cast<size_t>(rows), 0.01f);
    v.scales = s.scales.data();
  }
  v.data = s.data.data();
  return s;
}

// Best of `reps` of one matmul on the CPU engine, in microseconds.
double time_matmul(CpuEngine& cpu, const WeightView& w, int m, bool high_only, int reps) {
  std::vector<float> x(static_cast<size_t>(m * w.cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 17) - 8) * 0.1f;
  std::vector<float> y(static_cast<size_t>(m * w.rows));
  MatmulJob job;
  job.op = MatmulOp::of(w, m);
  job.w = w;
  job.x = x.data();
  job.y = y.data();
  job.ldy = w.rows;
  job.i8s_high_only = high_only;
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    // A fresh input each time (the CPU caches the last one it quantized).
    x[static_cast<size_t>(r % x.size())] += 1e-3f;
    const double t0 = now_us();
    (void)cpu.submit(job);
    best = std::min(best, now_us() - t0);
  }
  return best;
}

// Log-linear interpolation of ns per weight at m.
double interpolate(const std::array<double, kCalibrationM.size()>& ns, double m) {
  if (m <= kCalibrationM.front()) return ns.front();
  for (size_t i = 1; i < kCalibrationM.size(); ++i) {
    if (m <= kCalibrationM[i]) {
      const double a = std::log(static_cast<double>(kCalibrationM[i - 1])), b = std::log(static_cast<double>(kCalibrationM[i]));
      const double f = (std::log(m) - a) / (b - a);
      return ns[i - 1] + f * (ns[i] - ns[i - 1]);
    }
  }
  // Past the last point a GEMM's time per token stays what it was there.
  return ns.back() * m / kCalibrationM.back();
}

}  // namespace

const char* kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::kI4: return "i4";
    case KernelKind::kNf4: return "nf4";
    case KernelKind::kI5: return "i5";
    case KernelKind::kI6: return "i6";
    case KernelKind::kI8: return "i8";
    case KernelKind::kI8s: return "i8s";
    case KernelKind::kF16: return "f16";
    case KernelKind::kBf16: return "bf16";
    case KernelKind::kF32: return "f32";
    case KernelKind::kReference: return "reference";
    case KernelKind::kKinds: break;
  }
  return "?";
}

KernelKind kernel_kind(const MatmulOp& op, bool i8s_high_only) {
  if (!op.is_tier) {
    switch (op.type) {
      case GgmlType::kF32: return KernelKind::kF32;
      case GgmlType::kF16: return KernelKind::kF16;
      case GgmlType::kBF16: return KernelKind::kBf16;
      default: return KernelKind::kReference;
    }
  }
  switch (op.tier) {
    case Tier::kI4: return KernelKind::kI4;
    case Tier::kNf4: return KernelKind::kNf4;
    case Tier::kI5: return KernelKind::kI5;
    case Tier::kI6: return KernelKind::kI6;
    // The carried K-quants are costed as the per-channel kernels of their
    // width (not calibrated on their own yet: they read 0-8 % more bytes).
    case Tier::kQ2k:
    case Tier::kQ3k:
    case Tier::kQ4k: return KernelKind::kI4;
    case Tier::kQ5k: return KernelKind::kI5;
    case Tier::kQ6k: return KernelKind::kI6;
    case Tier::kQ80: return KernelKind::kI8;
    case Tier::kI8: return KernelKind::kI8;
    case Tier::kI8s: return i8s_high_only ? KernelKind::kI4 : KernelKind::kI8s;
    case Tier::kF16: return KernelKind::kF16;
    case Tier::kBf16: return KernelKind::kBf16;
    default: return KernelKind::kF32;
  }
}

PerfModel PerfModel::defaults(int threads) {
  PerfModel m;
  m.threads_ = threads;
  m.machine_ = "built-in defaults (not measured)";
  // ns per weight: M = 1 from ~18 GB/s of stored bytes, then MAC rates of a
  // few tens of GMAC/s per core for the integer kernels.
  for (int k = 0; k < kKernelKinds; ++k) {
    const auto kind = static_cast<KernelKind>(k);
    double bytes_per_weight = 1.0;
    switch (kind) {
      case KernelKind::kI4: case KernelKind::kNf4: bytes_per_weight = 0.5; break;
      case KernelKind::kI5: bytes_per_weight = 0.625; break;
      case KernelKind::kI6: bytes_per_weight = 0.75; break;
      case KernelKind::kF16: case KernelKind::kBf16: bytes_per_weight = 2; break;
      case KernelKind::kF32: bytes_per_weight = 4; break;
      case KernelKind::kReference: bytes_per_weight = 0.5625; break;
      default: break;
    }
    const bool floats = kind == KernelKind::kF16 || kind == KernelKind::kBf16 || kind == KernelKind::kF32;
    const double gmacs = (kind == KernelKind::kReference ? 1.0 : floats ? 8.0 : 30.0) * threads;
    for (size_t i = 0; i < kCalibrationM.size(); ++i) {
      const double read = bytes_per_weight / 18.0;  // ns per weight at 18 GB/s
      m.ns_[static_cast<size_t>(k)][i] = std::max(read, kCalibrationM[i] / gmacs);
    }
  }
  return m;
}

Result<PerfModel> PerfModel::calibrate(ThreadPool& pool, const std::function<void(int, int)>& progress) {
  const double t_start = now_us();
  PerfModel m = defaults(pool.size());
  m.calibrated_ = true;
  m.machine_ = machine_identity();
  m.binary_ = binary_identity();
  CpuEngine cpu(CpuEngine::Kernels::kFast, &pool);
  std::mt19937 rng(11);
  // Decode streams weights from DRAM: at M = 1 a matrix of about 64 MiB,
  // far past the last-level cache; the GEMMs are compute-bound and use 4 M
  // weights.
  const int total = kKernelKinds;
  for (int k = 0; k < kKernelKinds; ++k) {
    const auto kind = static_cast<KernelKind>(k);
    const bool reference = kind == KernelKind::kReference;
    const double bits = reference ? 4.5 : tier_info(tier_of(kind)).bits;
    const int64_t cols = 4096;
    const int64_t big_rows = reference ? 256 : std::max<int64_t>(512, static_cast<int64_t>((64ll << 20) * 8 / bits / cols));
    {
      const SynthWeight w = synth_weight(kind, big_rows, cols, rng);
      const double us = time_matmul(cpu, w.view, 1, false, reference ? 2 : 6);
      m.ns_[static_cast<size_t>(k)][0] = us * 1e3 / static_cast<double>(big_rows * cols);
    }
    const SynthWeight w = synth_weight(kind, reference ? 64 : 1024, cols, rng);
    for (size_t i = 1; i < kCalibrationM.size(); ++i) {
      const int mm = kCalibrationM[i];
      if (reference && mm > 16) {
        // The reference kernels scale linearly with M: extrapolate.
        m.ns_[static_cast<size_t>(k)][i] = m.ns_[static_cast<size_t>(k)][i - 1] * mm / kCalibrationM[i - 1];
        continue;
      }
      const double us = time_matmul(cpu, w.view, mm, false, 3);
      m.ns_[static_cast<size_t>(k)][i] = us * 1e3 / static_cast<double>(w.view.rows * cols);
    }
    if (progress) progress(k + 1, total);
  }
  // A small matmul's fixed cost: the pool's dispatch and joins.
  {
    const SynthWeight w = synth_weight(KernelKind::kI8, 64, 256, rng);
    m.call_us_ = time_matmul(cpu, w.view, 1, false, 50);
  }
  // The NPU's host side on vnpu with its arithmetic off (host work only).
  {
    npu::VnpuOptions o;
    ORK_ASSIGN_OR_RETURN(o.profile, npu::find_profile("hexagon-v75"));
    o.compute = false;
    ORK_ASSIGN_OR_RETURN(std::unique_ptr<npu::NpuEngine> npu, npu::NpuEngine::create(o));
    const SynthWeight w = synth_weight(KernelKind::kI8, 256, 1024, rng);
    std::vector<float> x(1024, 0.5f), y(256);
    MatmulJob job;
    job.op = MatmulOp::of(w.view, 1);
    job.w = w.view;
    job.x = x.data();
    job.y = y.data();
    job.ldy = 256;
    double submit = 1e30, poll = 1e30;
    for (int r = 0; r < 20; ++r) {
      const double t0 = now_us();
      auto fence = npu->submit(job);
      const double t1 = now_us();
      if (!fence.is_ok()) return fence.status();
      (void)Engine::poll(*fence);
      const double t2 = now_us();
      ORK_RETURN_IF_ERROR(Engine::wait(*fence));
      submit = std::min(submit, t1 - t0);
      poll = std::min(poll, t2 - t1);
    }
    m.npu_submit_us_ = submit;
    m.npu_poll_us_ = poll;
    std::vector<float> a(1 << 20, 1.0f), b(1 << 20);
    const double t0 = now_us();
    for (int r = 0; r < 8; ++r) std::copy(a.begin(), a.end(), b.begin());
    m.npu_copy_gbps_ = 8.0 * 4.0 * static_cast<double>(a.size()) / ((now_us() - t0) * 1e3);
  }
  m.seconds_ = (now_us() - t_start) / 1e6;
  return m;
}

double PerfModel::cpu_us(const MatmulOp& op, bool i8s_high_only) const {
  const KernelKind kind = kernel_kind(op, i8s_high_only);
  const double weights = static_cast<double>(op.n) * static_cast<double>(op.k);
  return call_us_ + weights * interpolate(ns_[static_cast<size_t>(kind)], static_cast<double>(op.m)) / 1e3;
}

double PerfModel::npu_host_us(const MatmulOp& op) const {
  const double bytes = 4.0 * static_cast<double>(op.m) * static_cast<double>(op.k + op.n);
  return npu_submit_us_ + npu_poll_us_ + bytes / (npu_copy_gbps_ * 1e3);
}

double PerfModel::npu_us(const Engine& npu, const MatmulOp& op) const {
  const double device = npu.predict_us(op);
  return device < 0 ? -1.0 : device + npu_host_us(op);
}

std::string PerfModel::cache_path(int threads) {
  const std::string dir = cache_dir();
  const size_t key = std::hash<std::string>{}(machine_identity() + "|" + binary_identity());
  return fmt::format("{}/calibration-{:016x}-t{}.json", dir, key, threads);
}

Result<PerfModel> PerfModel::cached_or_calibrate(ThreadPool& pool, std::string* note,
                                                 const std::function<void(int, int)>& progress) {
  const std::string path = cache_path(pool.size());
  if (auto cached = load(path); cached.is_ok() && cached->machine_ == machine_identity() &&
                                 cached->binary_ == binary_identity() && cached->threads_ == pool.size()) {
    if (note != nullptr) *note = "performance model: " + path + " (cached)";
    return cached;
  }
  ORK_ASSIGN_OR_RETURN(PerfModel m, calibrate(pool, progress));
  const std::string dir = path.substr(0, path.rfind('/'));
  std::string made;
  for (size_t at = 1; at != std::string::npos;) {
    at = dir.find('/', at + 1);
    ::mkdir(dir.substr(0, at).c_str(), 0755);
  }
  const Status saved = m.save(path);
  if (note != nullptr) {
    *note = saved.is_ok() ? fmt::format("performance model: calibrated in {:.1f} s, saved to {}", m.seconds_, path)
                          : fmt::format("performance model: calibrated in {:.1f} s; warning: not cached: {}", m.seconds_,
                                        saved.message());
  }
  return m;
}

Status PerfModel::save(const std::string& path) const {
  nlohmann::json j;
  j["format"] = kFormatVersion;
  j["machine"] = machine_;
  j["binary"] = binary_;
  j["threads"] = threads_;
  j["seconds"] = seconds_;
  j["call_us"] = call_us_;
  j["npu_host"] = {{"submit_us", npu_submit_us_}, {"poll_us", npu_poll_us_}, {"copy_gbps", npu_copy_gbps_}};
  for (int k = 0; k < kKernelKinds; ++k) {
    j["ns_per_weight"][kernel_kind_name(static_cast<KernelKind>(k))] = ns_[static_cast<size_t>(k)];
  }
  return write_file_atomically(path, j.dump(1) + "\n");
}

Result<PerfModel> PerfModel::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error(StatusCode::kNotFound, "{}: no performance model", path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("format", 0) != kFormatVersion) {
    return error(StatusCode::kCorrupt, "{}: not a performance model of this ork (format {})", path, kFormatVersion);
  }
  PerfModel m;
  m.calibrated_ = true;
  m.machine_ = j.value("machine", "");
  m.binary_ = j.value("binary", "");
  m.threads_ = j.value("threads", 1);
  m.seconds_ = j.value("seconds", 0.0);
  m.call_us_ = j.value("call_us", 2.0);
  if (j.contains("npu_host") && j["npu_host"].is_object()) {
    m.npu_submit_us_ = j["npu_host"].value("submit_us", 10.0);
    m.npu_poll_us_ = j["npu_host"].value("poll_us", 0.2);
    m.npu_copy_gbps_ = j["npu_host"].value("copy_gbps", 10.0);
  }
  for (int k = 0; k < kKernelKinds; ++k) {
    const char* name = kernel_kind_name(static_cast<KernelKind>(k));
    if (!j.contains("ns_per_weight") || !j["ns_per_weight"].contains(name) ||
        !j["ns_per_weight"][name].is_array() || j["ns_per_weight"][name].size() != kCalibrationM.size()) {
      return error(StatusCode::kCorrupt, "{}: kernel '{}' is missing", path, name);
    }
    for (size_t i = 0; i < kCalibrationM.size(); ++i) {
      const auto& v = j["ns_per_weight"][name][i];
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) {
        return error(StatusCode::kCorrupt, "{}: kernel '{}' has a rate that is not a positive number", path, name);
      }
      m.ns_[static_cast<size_t>(k)][i] = v.get<double>();
    }
  }
  return m;
}

std::string PerfModel::describe() const {
  std::string out = fmt::format("performance model ({}; {} threads{})\n  machine  {}\n", calibrated_ ? "calibrated" : "defaults",
                                threads_, calibrated_ ? fmt::format(", measured in {:.1f} s", seconds_) : "", machine_);
  out += "  kernel     M=1 GB/s of weights";
  for (size_t i = 1; i < kCalibrationM.size(); ++i) out += fmt::format("  M={:<3} GMAC/s", kCalibrationM[i]);
  out += "\n";
  for (int k = 0; k < kKernelKinds; ++k) {
    const auto kind = static_cast<KernelKind>(k);
    const double bytes = kind == KernelKind::kReference ? 0.5625 : tier_info(tier_of(kind)).bits / 8.0;
    out += fmt::format("  {:<10} {:>8.2f}            ", kernel_kind_name(kind), bytes / ns_[static_cast<size_t>(k)][0]);
    for (size_t i = 1; i < kCalibrationM.size(); ++i) {
      out += fmt::format("  {:>12.2f}", kCalibrationM[i] / ns_[static_cast<size_t>(k)][i]);
    }
    out += "\n";
  }
  out += fmt::format("  a matmul's fixed cost {:.2f} us; NPU host side: submit {:.2f} us, poll {:.2f} us, copies at {:.1f} GB/s\n",
                     call_us_, npu_submit_us_, npu_poll_us_, npu_copy_gbps_);
  return out;
}

std::string PerfModel::json() const {
  nlohmann::json j;
  j["calibrated"] = calibrated_;
  j["threads"] = threads_;
  j["machine"] = machine_;
  j["call_us"] = call_us_;
  j["npu_host"] = {{"submit_us", npu_submit_us_}, {"poll_us", npu_poll_us_}, {"copy_gbps", npu_copy_gbps_}};
  for (int k = 0; k < kKernelKinds; ++k) {
    const auto kind = static_cast<KernelKind>(k);
    const double bytes = kind == KernelKind::kReference ? 0.5625 : tier_info(tier_of(kind)).bits / 8.0;
    nlohmann::json e;
    e["gemv_gbps"] = bytes / ns_[static_cast<size_t>(k)][0];
    for (size_t i = 1; i < kCalibrationM.size(); ++i) {
      e["gmacs_m" + std::to_string(kCalibrationM[i])] = kCalibrationM[i] / ns_[static_cast<size_t>(k)][i];
    }
    j["kernels"][kernel_kind_name(kind)] = e;
  }
  return j.dump();
}

}  // namespace ork
