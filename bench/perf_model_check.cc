// How well the performance model predicts this machine: calibrates it,
// then times matmuls of shapes the calibration did not use (each tier, at
// M = 1 and M = 64, past the caches) and prints predicted against measured
// (median of 9) with the error. A measurement, not a test: the machine's
// bandwidth drifts, so nothing here asserts a time.
// Usage: ork-perf-model-check [threads]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "dispatch/perf_model.h"
#include "engines/cpu/cpu_engine.h"
#include "kernels/cpu/targets.h"

namespace {

using namespace ork;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double time_matmul(CpuEngine& cpu, Tier tier, int64_t rows, int64_t k, int m, double* predicted, const PerfModel& model) {
  std::vector<uint8_t> data(tier_data_bytes(tier, rows, k));
  uint64_t state = 88172645463325252ull;
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    std::memcpy(&data[i], &state, 8);
  }
  std::vector<float> scales(static_cast<size_t>(rows), 0.01f);
  WeightView w;
  w.is_tier = true;
  w.tier = tier;
  w.data = data.data();
  w.scales = scales.data();
  w.cols = k;
  w.rows = rows;
  w.k_stored = k;
  std::vector<float> x(static_cast<size_t>(k * m), 0.5f), y(static_cast<size_t>(rows * m));
  MatmulJob job;
  job.op = MatmulOp::of(w, m);
  job.w = w;
  job.x = x.data();
  job.y = y.data();
  job.ldy = rows;
  std::vector<double> times;
  for (int r = 0; r < 9; ++r) {
    x[static_cast<size_t>(r)] += 1.0f;  // a fresh input
    const auto a = std::chrono::steady_clock::now();
    if (!cpu.submit(job).is_ok()) std::exit(1);
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
  }
  *predicted = model.cpu_us(job.op);
  return median(times);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) ThreadPool::set_default_threads(std::atoi(argv[1]));
  ThreadPool& pool = ThreadPool::global();
  std::printf("perf model check: %d threads, Highway target %s\n", pool.size(),
              cpu::compiled_target_count() > 0 ? cpu::target_name(0) : "?");
  const auto t0 = std::chrono::steady_clock::now();
  auto model = PerfModel::calibrate(pool);
  if (!model.is_ok()) {
    std::fprintf(stderr, "%s\n", model.status().to_string().c_str());
    return 1;
  }
  std::printf("calibrated in %.2f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  CpuEngine cpu(CpuEngine::Kernels::kFast, &pool);
  std::printf("%-5s %6s %6s %4s %12s %12s %8s\n", "tier", "rows", "k", "M", "predicted us", "measured us", "error");
  for (Tier tier : {Tier::kI4, Tier::kNf4, Tier::kI8, Tier::kI8s}) {
    for (int m : {1, 64}) {
      const int64_t rows = m == 1 ? 8192 : 2048, k = 6144;
      double predicted = 0;
      const double measured = time_matmul(cpu, tier, rows, k, m, &predicted, *model);
      std::printf("%-5s %6lld %6lld %4d %12.1f %12.1f %+7.1f%%\n", std::string(tier_name(tier)).c_str(), static_cast<long long>(rows),
                  static_cast<long long>(k), m, predicted, measured, 100 * (predicted - measured) / measured);
    }
  }
  return 0;
}
