// The op-consistency harness for the dispatcher: every routing mode - CPU,
// NPU, row split at several ratios, overlay hit, overlay miss - with 1 to 4
// vnpu sessions, against the integer reference, over odd shapes and M from
// 1 to 64. Then the rules: the overlay never waits, a device error is an
// error, the router's choices follow the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "core/thread_pool.h"
#include "dispatch/dispatcher.h"
#include "dispatch/job_slots.h"
#include "dispatch/perf_model.h"
#include "engines/npu/npu_engine.h"
#include "kernels/ref/quant_matmul.h"
#include "random_weight.h"

namespace ork {
namespace {

using npu::NpuEngine;

struct Weight : testing::RandomWeight {
  WeightView view;
};

Weight make_weight(Tier tier, int64_t rows, int64_t cols, uint32_t seed) {
  Weight w;
  static_cast<testing::RandomWeight&>(w) = testing::random_weight(tier, rows, cols, seed);
  w.view = w.weight();
  return w;
}

std::vector<float> make_acts(int64_t m, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * cols));
  for (float& v : x) v = normal(rng);
  return x;
}

// The integer reference on the input padded to k and quantized per token
// (int8, or int4 for W4A4), the weight read as `high_only` says; or -
// `per_block`, the CPU's fast kernels on i8 - per 32 from the padded floats.
std::vector<float> reference(const Weight& w, const std::vector<float>& x, int64_t m, bool int4_acts, bool high_only,
                             bool per_block = false) {
  std::vector<float> padded(static_cast<size_t>(m * w.k), 0.0f);
  for (int64_t t = 0; t < m; ++t) std::copy_n(&x[static_cast<size_t>(t * w.cols)], w.cols, &padded[static_cast<size_t>(t * w.k)]);
  std::vector<int8_t> q(static_cast<size_t>(m * w.k));
  std::vector<float> s(static_cast<size_t>(m));
  std::vector<int32_t> sum(static_cast<size_t>(m));
  ref::quantize_acts(padded.data(), static_cast<int>(m), w.k, q.data(), s.data(), sum.data(),
                     int4_acts ? npu::kW4A4MaxCode : 127);
  std::vector<float> y(static_cast<size_t>(m * w.rows));
  ref::quant_matmul(quant_weights(w.view.tier_tensor(), high_only),
                    {q.data(), s.data(), sum.data(), w.k, static_cast<int>(m), per_block ? padded.data() : nullptr}, y.data(),
                    w.rows, 0, w.rows);
  return y;
}

npu::VnpuOptions vnpu(int sessions, const std::string& profile = "hexagon-v75") {
  npu::VnpuOptions o;
  o.profile = *npu::find_profile(profile);
  o.sessions = sessions;
  o.check_lines = true;
  return o;
}

// The wall clock's options with no host budget: tests of the overlay's
// rules want every job they ask for, however long a sanitizer makes one
// (the budget has a test of its own).
DispatchOptions unbudgeted() {
  DispatchOptions o;
  o.overlay_budget = 1.0;
  return o;
}

std::vector<float> run(Dispatcher& d, const Weight& w, const std::vector<float>& x, int m) {
  std::vector<float> y(static_cast<size_t>(m * w.rows), -7.0f);
  const Status s = d.matmul(w.view, x.data(), m, y.data());
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return y;
}

TEST(DispatchConsistency, EveryRouteAgreesWithTheReference) {
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 100, 37}, {3, 257, 130}, {17, 64, 129}, {64, 333, 96}, {40, 31, 200}};
  std::vector<std::unique_ptr<NpuEngine>> npus;
  for (int s = 1; s <= 4; ++s) npus.push_back(NpuEngine::create(vnpu(s)).value());
  uint32_t seed = 100;
  int checked = 0;
  for (Tier tier : {Tier::kI8, Tier::kI8s, Tier::kI4, Tier::kNf4}) {
    for (const auto& [m, cols, n] : shapes) {
      SCOPED_TRACE(fmt::format("{} m={} cols={} n={}", tier_name(tier), m, cols, n));
      const Weight w = make_weight(tier, n, cols, seed++);
      const std::vector<float> x = make_acts(m, cols, seed++);
      const bool w4a4 = tier == Tier::kI4;
      // The CPU alone: A8 (per 32 on i8: to rounding), both planes of i8s.
      Dispatcher cpu_only;
      const bool i8 = tier == Tier::kI8;
      const std::vector<float> want = reference(w, x, m, false, false, i8);
      const float tol = i8 ? testing::rounding_of(want) : 0.0f;
      const std::vector<float> cpu_got = run(cpu_only, w, x, static_cast<int>(m));
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(cpu_got[i], want[i], tol) << "at " << i;
      for (auto& e : npus) {
        SCOPED_TRACE(e->name());
        const std::vector<float> npu_want = reference(w, x, m, w4a4, false);  // per token: the NPU's datapath
        // Prefill routes, forced: NPU alone and row splits.
        if (m > 1) {
          for (auto [route, fraction] : {std::pair{Route::kNpu, 1.0}, {Route::kSplit, 0.25}, {Route::kSplit, 0.5},
                                         {Route::kSplit, 0.75}}) {
            DispatchOptions o;
            o.force_prefill = route;
            o.split_fraction = fraction;
            Dispatcher d;
            d.set_npu(e.get(), o);
            const std::vector<float> got = run(d, w, x, static_cast<int>(m));
            if (route == Route::kSplit) {
              // Rows [0, r) from the NPU, the rest from the CPU: each its
              // engine's reference (exact, or to rounding for the CPU's i8).
              const auto r = static_cast<size_t>(std::clamp<int64_t>(static_cast<int64_t>(fraction * n) / 32 * 32, 1, n - 1));
              for (int64_t t = 0; t < m; ++t) {
                for (int64_t i = 0; i < n; ++i) {
                  const size_t at = static_cast<size_t>(t * n + i);
                  if (static_cast<size_t>(i) < r) {
                    ASSERT_EQ(got[at], npu_want[at]) << "t=" << t << " row " << i;
                  } else {
                    ASSERT_NEAR(got[at], want[at], tol) << "t=" << t << " row " << i;
                  }
                }
              }
              EXPECT_EQ(d.stats().prefill[static_cast<size_t>(Route::kSplit)], 1u);
              EXPECT_EQ(d.stats().npu_rows, r);
            } else {
              EXPECT_EQ(got, npu_want) << route_name(route) << " " << fraction;
            }
            EXPECT_EQ(e->device().lines()->conflicts(), 0u);
            ++checked;
          }
        }
        // Decode: an i8s weight is overlaid. A hit gives the NPU's W8A8 of
        // both planes, a miss the CPU's high plane.
        if (m == 1 && tier == Tier::kI8s) {
          for (double rate : {1.0, 0.0}) {
            DispatchOptions o;
            o.clock = OverlayClock::kForced;
            o.hit_rate = rate;
            Dispatcher d;
            d.set_npu(e.get(), o);
            const std::vector<float> got = run(d, w, x, 1);
            EXPECT_EQ(got, rate > 0 ? npu_want : reference(w, x, 1, false, true)) << "hit rate " << rate;
            EXPECT_EQ(d.stats().decode[static_cast<size_t>(Route::kOverlay)], 1u);
            EXPECT_EQ(d.stats().overlay_hits, rate > 0 ? 1u : 0u);
            EXPECT_EQ(d.stats().overlay_misses, rate > 0 ? 0u : 1u);
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

// An NPU whose fences never signal: the overlay must never wait for it, and
// every result is the CPU's - only quality is lost.
class SilentEngine final : public Engine {
 public:
  class NeverFence final : public Fence {
   public:
    bool done() const override { return false; }
    Status wait() override {
      ADD_FAILURE() << "the overlay waited on the NPU";
      return error(StatusCode::kInternal, "waited");
    }
  };
  std::string name() const override { return "silent"; }
  Support supports(const MatmulOp& op) const override {
    return op.is_tier && op.tier == Tier::kI8s ? Support::yes() : Support::no("only i8s");
  }
  Status prepare(const MatmulOp&) override { return Status::ok(); }
  Result<FencePtr> submit(const MatmulJob&) override {
    ++submitted;
    return FencePtr(std::make_shared<NeverFence>());
  }
  int in_flight() const override { return 0; }  // it claims to be free: the worst case
  double predict_us(const MatmulOp&) const override { return 1.0; }
  int submitted = 0;
};

TEST(DispatchOverlay, ADeviceThatNeverSignalsChangesNothingButQuality) {
  const Weight w = make_weight(Tier::kI8s, 300, 256, 7);
  const Weight v = make_weight(Tier::kI8s, 64, 256, 8);
  const std::vector<float> x = make_acts(1, 256, 9);
  SilentEngine silent;
  // One thread: in a shared group the jobs are opened while the engine's
  // other threads start on the rows, and an output finished first is not
  // given one (JobSlots, by design) - so "every job submitted" holds only
  // when the opener runs first, which one thread makes certain.
  ThreadPool one(1);
  Dispatcher d(&one);
  d.set_npu(&silent, unbudgeted());  // wall clock: hit only if signalled
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(run(d, w, x, 1), reference(w, x, 1, false, true));
  // A shared-input group: each output resolved in the CPU's loop.
  std::vector<float> y0(300), y1(64);
  const Dispatcher::Output outs[] = {{&w.view, y0.data()}, {&v.view, y1.data()}};
  std::atomic<int> done{0};
  ASSERT_TRUE(d.matmul_shared(outs, x.data(), 1, [&](int) { ++done; }).is_ok());
  EXPECT_EQ(done.load(), 2);
  EXPECT_EQ(y0, reference(w, x, 1, false, true));
  EXPECT_EQ(y1, reference(v, x, 1, false, true));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_EQ(silent.submitted, 3);
  EXPECT_EQ(d.stats().overlay_misses, 3u);
  EXPECT_EQ(d.stats().overlay_hits, 0u);
}

// A device that only keeps time (vnpu's `timing`): its fences signal at
// once, its rows are junk. Its hits are counted and their rows moved (the
// host cost being measured), but never over the CPU's: a timed run computes
// exactly what a CPU-only run does.
TEST(DispatchOverlay, ATimeKeepingDevicesRowsAreNeverTaken) {
  class TimeKeeper final : public Engine {
   public:
    class Done final : public Fence {
     public:
      Done(float* y, int64_t n) : y_(y), n_(n) {}
      bool done() const override { return true; }
      Status wait() override {
        std::fill(y_, y_ + n_, 12345.0f);  // junk, as a timing-only device writes
        return Status::ok();
      }

     private:
      float* y_;
      int64_t n_;
    };
    std::string name() const override { return "timekeeper"; }
    Support supports(const MatmulOp& op) const override {
      return op.is_tier && op.tier == Tier::kI8s ? Support::yes() : Support::no("only i8s");
    }
    Status prepare(const MatmulOp&) override { return Status::ok(); }
    Result<FencePtr> submit(const MatmulJob& job) override {
      return FencePtr(std::make_shared<Done>(job.y, job.op.n));
    }
    double predict_us(const MatmulOp&) const override { return 0.0; }
    bool results_valid() const override { return false; }
  } keeper;
  const Weight w = make_weight(Tier::kI8s, 200, 128, 21);
  const Weight v = make_weight(Tier::kI8s, 96, 128, 22);
  const std::vector<float> x = make_acts(1, 128, 23);
  ThreadPool one(1);  // every job opened before its output is done: see above
  Dispatcher d(&one);
  d.set_npu(&keeper, unbudgeted());
  EXPECT_EQ(run(d, w, x, 1), reference(w, x, 1, false, true));
  std::vector<float> y0(200), y1(96);
  const Dispatcher::Output outs[] = {{&w.view, y0.data()}, {&v.view, y1.data()}};
  ASSERT_TRUE(d.matmul_shared(outs, x.data(), 1, [](int) {}).is_ok());
  EXPECT_EQ(y0, reference(w, x, 1, false, true));
  EXPECT_EQ(y1, reference(v, x, 1, false, true));
  EXPECT_EQ(d.stats().overlay_hits, 3u);
}

TEST(DispatchOverlay, TheNpuMustBeFree) {
  // A device with a job in flight is not free: the overlay is skipped and
  // the CPU's high plane stands (never a queue behind another token).
  class Busy final : public Engine {
   public:
    std::string name() const override { return "busy"; }
    Support supports(const MatmulOp&) const override { return Support::yes(); }
    Status prepare(const MatmulOp&) override { return Status::ok(); }
    Result<FencePtr> submit(const MatmulJob&) override {
      ADD_FAILURE() << "submitted to a busy NPU";
      return error(StatusCode::kInternal, "busy");
    }
    int in_flight() const override { return 1; }
  } busy;
  const Weight w = make_weight(Tier::kI8s, 128, 64, 11);
  const std::vector<float> x = make_acts(1, 64, 12);
  Dispatcher d;
  d.set_npu(&busy, unbudgeted());
  EXPECT_EQ(run(d, w, x, 1), reference(w, x, 1, false, true));
  EXPECT_EQ(d.stats().overlay_skipped, 1u);
}

// A device predicted to finish after the CPU needs its result is not
// given the job (it would only be busy for the next one); one predicted in
// time is, and its rows are used.
// A device that computes nothing and predicts every job to take `us`. Its
// jobs are done at once; as the Engine contract says, a job's rows are
// written when its fence is waited on - with a mark, 42, so that a test
// sees which rows came from the device.
class Predicting final : public Engine {
 public:
  class Done final : public Fence {
   public:
    Done(float* y, int64_t rows) : y_(y), rows_(rows) {}
    bool done() const override { return true; }
    Status wait() override {
      std::fill_n(y_, rows_, 42.0f);
      return Status::ok();
    }

   private:
    float* y_;
    int64_t rows_;
  };
  explicit Predicting(double us) : us_(us) {}
  std::string name() const override { return "predicting"; }
  Support supports(const MatmulOp&) const override { return Support::yes(); }
  Status prepare(const MatmulOp&) override { return Status::ok(); }
  Result<FencePtr> submit(const MatmulJob& job) override {
    ++submitted;
    return FencePtr(std::make_shared<Done>(job.y, job.w.rows));
  }
  double predict_us(const MatmulOp&) const override { return us_; }
  int submitted = 0;

 private:
  double us_;
};

TEST(DispatchOverlay, AJobPredictedLateIsNotStarted) {
  const Weight w = make_weight(Tier::kI8s, 300, 256, 31);
  const std::vector<float> x = make_acts(1, 256, 32);
  DispatchOptions o;
  o.clock = OverlayClock::kVirtual;
  o.device_cpu_gbps = 20;  // the CPU reads the high plane (300 x 132 bytes) in about 2 us
  {
    Predicting slow(1000.0);
    Dispatcher d;
    d.set_npu(&slow, o);
    EXPECT_EQ(run(d, w, x, 1), reference(w, x, 1, false, true));
    EXPECT_EQ(slow.submitted, 0);
    EXPECT_EQ(d.stats().overlay_skipped, 1u);
    EXPECT_EQ(d.stats().overlay_hits + d.stats().overlay_misses, 0u);
  }
  {
    Predicting fast(0.5);
    Dispatcher d;
    d.set_npu(&fast, o);
    EXPECT_EQ(run(d, w, x, 1), std::vector<float>(300, 42.0f));
    EXPECT_EQ(fast.submitted, 1);
    EXPECT_EQ(d.stats().overlay_hits, 1u);
    EXPECT_EQ(d.stats().overlay_skipped, 0u);
  }
  {
    // The forced clock starts every job, whatever is predicted.
    Predicting slow(1000.0);
    o.clock = OverlayClock::kForced;
    o.hit_rate = 0.0;
    Dispatcher d;
    d.set_npu(&slow, o);
    EXPECT_EQ(run(d, w, x, 1), reference(w, x, 1, false, true));
    EXPECT_EQ(slow.submitted, 1);
    EXPECT_EQ(d.stats().overlay_misses, 1u);
  }
}

// A device whose every submission costs the host host_us (50 us unless
// set), always in time.
class Costly final : public Engine {
 public:
  class Done final : public Fence {
   public:
    bool done() const override { return true; }
    Status wait() override { return Status::ok(); }
  };
  std::string name() const override { return "costly"; }
  Support supports(const MatmulOp&) const override { return Support::yes(); }
  Status prepare(const MatmulOp&) override { return Status::ok(); }
  Result<FencePtr> submit(const MatmulJob&) override {
    ++submitted;
    const auto start = std::chrono::steady_clock::now();
    const auto until = start + std::chrono::microseconds(host_us);
    auto now = start;
    while (now < until) now = std::chrono::steady_clock::now();
    if (submitted == stalled_job) std::this_thread::sleep_for(std::chrono::microseconds(stall_us));
    now = std::chrono::steady_clock::now();
    longest_us = std::max(longest_us, std::chrono::duration<double, std::micro>(now - start).count());
    return FencePtr(std::make_shared<Done>());
  }
  double predict_us(const MatmulOp&) const override { return 0.0; }
  enum { kHostUs = 50 };
  int host_us = kHostUs;
  int submitted = 0;
  // The longest submission as the wall clock saw it: host_us, or more
  // where the thread was preempted in it (a loaded machine).
  double longest_us = 0;
  // The submission numbered stalled_job (from 1) takes stall_us more, as a
  // thread preempted in it would.
  int stalled_job = 0, stall_us = 0;
};

// The overlay's host work is on decode's critical path: at the wall clock
// it may take only its budget's share of decode's time (plus the bucket's
// 100 us and the one job that overdraws it). A device whose submission
// costs the host 50 us gets almost no jobs at a budget of 1 %, every job
// at a budget of 1, and the jobs it was not given are counted.
TEST(DispatchOverlay, TheOverlaysHostTimeStaysWithinItsBudget) {
  const Weight w = make_weight(Tier::kI8s, 256, 256, 41);
  const std::vector<float> x = make_acts(1, 256, 42);
  constexpr int kCalls = 400;
  for (const double budget : {0.01, 1.0}) {
    Costly costly;
    DispatchOptions o;
    o.overlay_budget = budget;
    Dispatcher d;
    d.set_npu(&costly, o);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) {
      std::vector<float> y(256);
      ASSERT_TRUE(d.matmul(w.view, x.data(), 1, y.data()).is_ok());
    }
    const double elapsed_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    const DispatchStats& s = d.stats();
    EXPECT_EQ(static_cast<uint64_t>(costly.submitted) + s.overlay_over_budget, static_cast<uint64_t>(kCalls));
    // The host time is measured, not assumed: at least what the device's
    // submissions took, at most the whole run.
    EXPECT_GE(s.overlay_host_us, costly.submitted * Costly::kHostUs);
    EXPECT_LE(s.overlay_host_us, elapsed_us);
    if (budget >= 1.0) {
      EXPECT_EQ(costly.submitted, kCalls);
      EXPECT_EQ(s.overlay_over_budget, 0u);
    } else {
      EXPECT_GE(costly.submitted, 1);
      EXPECT_LE(costly.submitted * Costly::kHostUs, budget * elapsed_us + 100.0 + 2 * Costly::kHostUs)
          << costly.submitted << " jobs in " << elapsed_us << " us";
      EXPECT_GT(s.overlay_over_budget, 0u);
    }
  }
}

// The budget is a share of decode's own time: with the steps bracketed,
// the pauses between them (a server's idle slot, the other half of a
// paired benchmark) earn nothing - without them they do: as many jobs as
// the whole run's 1 % pays for at their measured host cost (a sanitized
// build's overlay path costs the host more than the device's 50 us), at
// most one a step.
TEST(DispatchOverlay, OnlyTheTimeInsideDecodeStepsEarnsTheBudget) {
  const Weight w = make_weight(Tier::kI8s, 256, 256, 41);
  const std::vector<float> x = make_acts(1, 256, 42);
  constexpr int kSteps = 60;
  for (const bool bracketed : {true, false}) {
    Costly costly;
    DispatchOptions o;
    o.overlay_budget = 0.01;
    Dispatcher d;
    d.set_npu(&costly, o);
    double inside_us = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kSteps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      if (bracketed) d.begin_step();
      std::vector<float> y(256);
      ASSERT_TRUE(d.matmul(w.view, x.data(), 1, y.data()).is_ok());
      if (bracketed) d.end_step();
      inside_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // 100 us of budget, if it earned
    }
    if (bracketed) {
      EXPECT_LE(costly.submitted * Costly::kHostUs, 0.01 * inside_us + 100.0 + 2 * Costly::kHostUs)
          << costly.submitted << " jobs in " << inside_us << " us of steps";
    } else {
      const double elapsed_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      const double cost_us = d.stats().overlay_host_us / std::max(1, costly.submitted);
      const double paid_for = std::min<double>(kSteps, 0.01 * elapsed_us / cost_us);
      EXPECT_GE(costly.submitted, 0.6 * paid_for) << "the pauses earn without steps: " << costly.submitted << " jobs of "
                                                  << cost_us << " us in " << elapsed_us << " us";
    }
  }
}

// A job that costs the host more than the bucket's 100 us is rate-limited,
// not starved: the bucket holds two of its jobs. With a fixed 100 us depth
// the running mean of the cost passed 100 us after the third job and no job
// was ever affordable again (3 of about 20 here; 11 of 60 steps under TSan).
// Once more with one job stalled 20 ms, as on a loaded machine (ctest -j2
// beside a test of many threads): the bucket is charged what it took, and
// the jobs after it wait until the budget has earned it back.
class DispatchOverlayStalled : public ::testing::TestWithParam<int> {};

TEST_P(DispatchOverlayStalled, AJobDearerThanTheBucketIsRateLimitedNotStarved) {
  const Weight w = make_weight(Tier::kI8s, 256, 256, 41);
  const std::vector<float> x = make_acts(1, 256, 42);
  constexpr int kSteps = 80;
  Costly costly;
  costly.host_us = 400;
  costly.stalled_job = 3;
  costly.stall_us = GetParam();
  DispatchOptions o;
  o.overlay_budget = 0.01;
  Dispatcher d;
  d.set_npu(&costly, o);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kSteps; ++i) {
    std::vector<float> y(256);
    ASSERT_TRUE(d.matmul(w.view, x.data(), 1, y.data()).is_ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // 100 us of budget: a quarter of a job
  }
  const double elapsed_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  const DispatchStats& s = d.stats();
  const double cost_us = s.overlay_host_us / std::max(1, costly.submitted);
  const double paid_for = 0.01 * elapsed_us / cost_us;
  EXPECT_GE(cost_us, 400.0);
  EXPECT_GE(costly.submitted, 0.6 * paid_for) << costly.submitted << " jobs of " << cost_us << " us in " << elapsed_us << " us";
  // ... and never more than the budget: what the run earned, the bucket's
  // first 100 us and the one job that overdraws it - at most the longest
  // (not the mean: a job preempted on a loaded machine takes the host far
  // longer, and the bucket is charged what it took), with 100 us for its
  // host work beside the submission.
  EXPECT_LE(s.overlay_host_us, 0.01 * elapsed_us + 100.0 + costly.longest_us + 100.0)
      << costly.submitted << " jobs, the longest " << costly.longest_us << " us";
  EXPECT_GT(s.overlay_over_budget, 0u);
}

INSTANTIATE_TEST_SUITE_P(DispatchOverlay, DispatchOverlayStalled, ::testing::Values(0, 20000),
                         [](const ::testing::TestParamInfo<int>& i) { return i.param == 0 ? "Unloaded" : "OneJobStalled20ms"; });

// A job opened beside the CPU's loop: whichever of opener and consumer
// comes first decides, and a job is resolved once or not at all.
TEST(JobSlots, TheOpenerOrTheConsumerComesFirstNeverBoth) {
  JobSlots slots;
  slots.reset(2);
  EXPECT_TRUE(slots.waiting(0));
  EXPECT_TRUE(slots.publish(0, 7));  // opened first: the consumer resolves it
  EXPECT_EQ(slots.take(0), 7);
  EXPECT_EQ(slots.take(0), -1);
  EXPECT_EQ(slots.take(1), -1);  // the consumer first: nothing to resolve, and no job after
  EXPECT_FALSE(slots.waiting(1));
  EXPECT_FALSE(slots.publish(1, 8));
  EXPECT_TRUE(slots.opened(0));
  EXPECT_TRUE(slots.opened(1));  // opened, never taken: the overlay counts it a miss
  slots.reset(3);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(slots.waiting(i));
    EXPECT_FALSE(slots.opened(i));
  }
  // Raced on two threads: every published job is taken exactly once.
  int taken = 0, published = 0;
  for (int round = 0; round < 2000; ++round) {
    slots.reset(1);
    bool handed = false;
    std::thread opener([&] { handed = slots.waiting(0) && slots.publish(0, round); });
    const int got = slots.take(0);
    opener.join();
    EXPECT_EQ(got >= 0, handed) << "round " << round;
    if (got >= 0) {
      EXPECT_EQ(got, round);
    }
    taken += got >= 0;
    published += handed;
  }
  EXPECT_EQ(taken, published);
}

TEST(DispatchErrors, ADeviceErrorIsAnErrorNeverASilentFallback) {
  const Weight w = make_weight(Tier::kI8, 96, 64, 21);
  const std::vector<float> x = make_acts(8, 64, 22);
  for (Route route : {Route::kNpu, Route::kSplit}) {
    auto e = NpuEngine::create(vnpu(2)).value();
    DispatchOptions o;
    o.force_prefill = route;
    Dispatcher d;
    d.set_npu(e.get(), o);
    e->fail_next_job_in(1);
    std::vector<float> y(8 * 96);
    const Status s = d.matmul(w.view, x.data(), 8, y.data());
    ASSERT_FALSE(s.is_ok()) << route_name(route);
    EXPECT_NE(s.message().find("injected failure"), std::string::npos) << s.message();
    // The next job runs normally.
    EXPECT_TRUE(d.matmul(w.view, x.data(), 8, y.data()).is_ok());
  }
  // An overlay that hits a failed job says so.
  const Weight s8 = make_weight(Tier::kI8s, 96, 64, 23);
  auto e = NpuEngine::create(vnpu(1)).value();
  DispatchOptions o;
  o.clock = OverlayClock::kForced;
  o.hit_rate = 1.0;
  Dispatcher d;
  d.set_npu(e.get(), o);
  e->fail_next_job_in(0);
  std::vector<float> y(96);
  const Status s = d.matmul(s8.view, x.data(), 1, y.data());
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("injected failure"), std::string::npos) << s.message();
}

// One MoE layer's routed experts at decode: 8 experts, 4 routed; gate and
// up i4, down i8s (the overlay's candidates).
struct RoutedExperts {
  static constexpr int kExperts = 8, kUsed = 4;
  static constexpr int64_t kEmbd = 64, kFf = 96;
  std::vector<Weight> gate, up, down;
  std::vector<WeightView> gv, uv, dv;
  std::vector<float> x = make_acts(1, kEmbd, 31);
  int32_t ids[kUsed] = {6, 1, 4, 3};
  float weights[kUsed] = {0.4f, 0.3f, 0.2f, 0.1f};
  std::vector<float> acc = std::vector<float>(kEmbd, 0.0f);

  RoutedExperts() {
    for (int e = 0; e < kExperts; ++e) {
      gate.push_back(make_weight(Tier::kI4, kFf, kEmbd, 100 + 3 * e));
      up.push_back(make_weight(Tier::kI4, kFf, kEmbd, 101 + 3 * e));
      down.push_back(make_weight(Tier::kI8s, kEmbd, kFf, 102 + 3 * e));
    }
    for (int e = 0; e < kExperts; ++e) {
      gv.push_back(gate[static_cast<size_t>(e)].view);
      uv.push_back(up[static_cast<size_t>(e)].view);
      dv.push_back(down[static_cast<size_t>(e)].view);
    }
  }
  // A call that sums into acc (zeroed).
  ExpertsCall call() {
    ExpertsCall c;
    c.gate = gv;
    c.up = uv;
    c.down = dv;
    c.ids = ids;
    c.weights = weights;
    c.n = 1;
    c.k = kUsed;
    c.n_embd = kEmbd;
    c.n_ff = kFf;
    c.x = x.data();
    std::fill(acc.begin(), acc.end(), 0.0f);
    c.acc = acc.data();
    return c;
  }
};

// Decode's experts with weights still arriving (an expert cache's reads):
// the engine computes the present ones first and awaits the rest, and the
// sum is the same bits as with every weight in. `present` here changes its
// answer after it is first asked, as a read finishing between two
// questions would: an engine that asked twice once left such an expert out
// of both halves of its order (the rows never computed, the sum stopped
// short).
TEST(DispatchExperts, WeightsStillArrivingGiveTheSameSum) {
  RoutedExperts ex;
  ThreadPool pool(2);
  auto run_experts = [&](bool arriving, std::vector<int>* awaited) {
    Dispatcher d(&pool);
    ExpertsCall call = ex.call();
    std::vector<int> asked(RoutedExperts::kExperts, 0);
    std::mutex mu;
    if (arriving) {
      // Absent when first asked, present from then on; expert 3 always.
      call.present = [&](int e) {
        std::lock_guard lock(mu);
        return e == 3 || asked[static_cast<size_t>(e)]++ > 0;
      };
      call.await = [&](int e) {
        std::lock_guard lock(mu);
        awaited->push_back(e);
      };
    }
    auto fused = d.experts(call);
    EXPECT_TRUE(fused.is_ok() && *fused);
    return ex.acc;
  };
  std::vector<int> awaited;
  const std::vector<float> all_in = run_experts(false, nullptr);
  for (int round = 0; round < 3; ++round) {
    awaited.clear();
    const std::vector<float> got = run_experts(true, &awaited);
    ASSERT_EQ(got, all_in) << "round " << round;
    std::sort(awaited.begin(), awaited.end());
    awaited.erase(std::unique(awaited.begin(), awaited.end()), awaited.end());
    EXPECT_EQ(awaited, (std::vector<int>{1, 3, 4, 6})) << "every routed expert awaited before it is read, no other";
  }
  EXPECT_NE(all_in, std::vector<float>(RoutedExperts::kEmbd, 0.0f));
}

// The downs' overlay jobs are opened when their inputs exist - after every
// gate and up - so a job is worth starting only if the device, started
// then, is predicted done before the CPU reaches that down. Reckoned from
// the layer's start instead, jobs sure to miss were opened (on the
// 12-layer MoE shape with hexagon-v75, 74 % of them missed).
TEST(DispatchExperts, ADownJobIsPredictedFromWhenItsInputExists) {
  RoutedExperts ex;
  DispatchOptions o;
  o.clock = OverlayClock::kVirtual;
  o.device_cpu_gbps = 20;
  // The virtual clock's CPU time of one down (its high plane) and of one
  // expert's gate and up together: twice a down's bytes.
  const WeightView& dw = ex.dv[0];
  const double down_us = static_cast<double>(dw.rows) * (static_cast<double>(dw.k_stored) / 2.0 + 4.0) / 20e3;
  const double gate_up_us = 2.0 * static_cast<double>(matrix_bytes(ex.gv[0])) / 20e3;
  const double gate_ups_us = RoutedExperts::kUsed * gate_up_us;
  const double device_us = 1.2 * RoutedExperts::kUsed * down_us;
  ASSERT_LT(device_us, gate_ups_us + down_us);
  {
    // Slower than all the downs together, faster than the experts' gates
    // and ups: from the layer's start the first down's job would look in
    // time; from when its input exists no down's job is.
    Predicting device(device_us);
    Dispatcher d;
    d.set_npu(&device, o);
    auto fused = d.experts(ex.call());
    ASSERT_TRUE(fused.is_ok() && *fused);
    EXPECT_EQ(device.submitted, 0);
    EXPECT_EQ(d.stats().overlay_skipped, static_cast<uint64_t>(RoutedExperts::kUsed));
  }
  {
    // Faster than a down: every down's job is in time, and taken.
    Predicting device(0.5 * down_us);
    Dispatcher d;
    d.set_npu(&device, o);
    auto fused = d.experts(ex.call());
    ASSERT_TRUE(fused.is_ok() && *fused);
    EXPECT_EQ(device.submitted, RoutedExperts::kUsed);
    EXPECT_EQ(d.stats().overlay_hits, static_cast<uint64_t>(RoutedExperts::kUsed));
  }
  {
    // By the wall clock a down's job is opened straight into the CPU's
    // rows, and a hit's rows replace them: every routed down taken, the
    // sum is the routing weights times the device's mark. One thread: the
    // opener then runs before the downs (lead first), so every slot is
    // published before its consumer comes. With two, the other thread may
    // take a down first - by design (JobSlots), and under a sanitizer on a
    // loaded machine it did, so "every down taken" is a one-thread fact.
    o.clock = OverlayClock::kWall;
    o.overlay_budget = 1.0;
    Predicting device(0.0);
    ThreadPool one(1);
    Dispatcher d(&one);
    d.set_npu(&device, o);
    auto fused = d.experts(ex.call());
    ASSERT_TRUE(fused.is_ok() && *fused);
    EXPECT_EQ(d.stats().overlay_hits, static_cast<uint64_t>(RoutedExperts::kUsed));
    float weight_sum = 0;
    for (float w : ex.weights) weight_sum += w;
    for (float v : ex.acc) EXPECT_NEAR(v, 42.0f * weight_sum, 1e-4f);
  }
}

// A model with made-up rates: the NPU twice as fast as the CPU per weight
// but 50 us to start, so small matmuls stay on the CPU, large ones split.
TEST(Router, ATensorsRoleIsItsNameWithoutBlockSuffixOrExpert) {
  EXPECT_EQ(overlay_role("blk.12.attn_v.weight"), "attn_v");
  EXPECT_EQ(overlay_role("blk.3.ffn_down_exps.weight.e17"), "ffn_down_exps");
  EXPECT_EQ(overlay_role("blk.0.ffn_down_shexp.weight"), "ffn_down_shexp");
  EXPECT_EQ(overlay_role("output.weight"), "output");
  EXPECT_EQ(overlay_role("blk.1.attn_output.energy"), "attn_output.energy");  // ".e" not followed by digits alone
  EXPECT_EQ(overlay_role(nullptr), "?");
  EXPECT_EQ(overlay_role("blk.4."), "?");
}

TEST(Router, PrefillGoesWhereTheModelPredictsItIsFastest) {
  const PerfModel model = PerfModel::defaults(2);
  auto e = NpuEngine::create(vnpu(1, "hexagon-v75")).value();
  const MatmulOp small{Tier::kI8, 2, 64, 32};
  const PrefillChoice a = choose_prefill(model, e.get(), small, true);
  EXPECT_EQ(a.route, Route::kCpu) << a.cpu_us << " vs " << a.npu_us;
  const MatmulOp big{Tier::kI8, 512, 2048, 8192};
  const PrefillChoice b = choose_prefill(model, e.get(), big, true);
  EXPECT_LE(b.routed_us, std::min(b.cpu_us, b.npu_us) + 1e-9);
  if (b.route == Route::kSplit) {
    EXPECT_GT(b.npu_rows, 0);
    EXPECT_LT(b.npu_rows, big.n);
    EXPECT_EQ(b.npu_rows % 32, 0);
  }
  // A tier the NPU cannot read stays on the CPU.
  const PrefillChoice c = choose_prefill(model, e.get(), MatmulOp{Tier::kI5, 512, 2048, 8192}, true);
  EXPECT_EQ(c.route, Route::kCpu);
  EXPECT_EQ(choose_prefill(model, nullptr, big, true).route, Route::kCpu);
}

TEST(PerfModelFile, RoundTripsAndRefusesWhatItCannotRead) {
  const PerfModel m = PerfModel::defaults(3);
  const std::string path = ::testing::TempDir() + "/model.json";
  ASSERT_TRUE(m.save(path).is_ok());
  auto back = PerfModel::load(path);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  const MatmulOp op{Tier::kNf4, 7, 512, 300};
  EXPECT_DOUBLE_EQ(back->cpu_us(op), m.cpu_us(op));
  EXPECT_EQ(back->threads(), 3);
  {
    std::ofstream(path) << "{\"format\": 1, \"ns_per_weight\": {\"i4\": [1, 2]}}";
  }
  auto bad = PerfModel::load(path);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("kernel"), std::string::npos) << bad.status().message();
  {
    std::ofstream(path) << "not json";
  }
  EXPECT_FALSE(PerfModel::load(path).is_ok());
}

}  // namespace
}  // namespace ork
