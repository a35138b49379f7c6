// The op-consistency harness: every engine (CPU reference, CPU fast, vnpu
// with 1 to 4 sessions) against the reference, over odd K, N that no tile
// or chunk divides, and M from 1 to 64; then vnpu's invariants one by one.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "engines/activations.h"
#include "engines/cpu/cpu_engine.h"
#include "engines/npu/npu_engine.h"
#include "kernels/ref/quant_matmul.h"
#include "random_weight.h"

namespace ork {
namespace {

using npu::NpuEngine;
using npu::VnpuOptions;

// A random weight of `cols` (odd) columns stored at a tier, and its float
// dequantization.
struct Weight : testing::RandomWeight {
  std::vector<float> dequant;  // rows x k
};

Weight make_weight(Tier tier, int64_t rows, int64_t cols, uint32_t seed) {
  Weight w;
  static_cast<testing::RandomWeight&>(w) = testing::random_weight(tier, rows, cols, seed);
  w.dequant.resize(static_cast<size_t>(rows * w.k));
  for (int64_t r = 0; r < rows; ++r) dequantize_tier_row(w.view(), r, &w.dequant[static_cast<size_t>(r * w.k)]);
  return w;
}

std::vector<float> make_acts(int64_t m, int64_t cols, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k), 0.0f);
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t j = 0; j < cols; ++j) x[static_cast<size_t>(t * k + j)] = normal(rng);
  }
  return x;
}

// Submits y = W x and waits; the fence's status.
Status try_run(Engine& e, const Weight& w, const std::vector<float>& x, int64_t m, std::vector<float>* y,
               bool* done_at_once = nullptr) {
  MatmulJob job;
  job.op = {w.tier, m, w.k, w.rows};
  job.w = WeightView::of_tier(w.view());
  job.x = x.data();
  job.x_in_basis = true;
  y->assign(static_cast<size_t>(m * w.rows), -1.0f);
  job.y = y->data();
  job.ldy = w.rows;
  ORK_ASSIGN_OR_RETURN(FencePtr fence, e.submit(job));
  if (done_at_once != nullptr) *done_at_once = Engine::poll(fence);
  ORK_RETURN_IF_ERROR(Engine::wait(fence));
  EXPECT_TRUE(Engine::poll(fence));
  return Status::ok();
}

std::vector<float> run(Engine& e, const Weight& w, const std::vector<float>& x, int64_t m) {
  std::vector<float> y;
  const Status s = try_run(e, w, x, m, &y);
  EXPECT_TRUE(s.is_ok()) << e.name() << ": " << s.to_string();
  return y;
}

// The integer reference on activations quantized as the datapath does:
// per token (int8, or int4 for W4A4), or - `per_block`, the CPU's fast
// kernels on i8 - per 32 from the floats (kernels/quant_types.h).
std::vector<float> reference(const Weight& w, const std::vector<float>& x, int64_t m, bool int4_acts,
                             bool per_block = false) {
  std::vector<int8_t> q(static_cast<size_t>(m * w.k));
  std::vector<float> s(static_cast<size_t>(m));
  std::vector<int32_t> sum(static_cast<size_t>(m));
  ref::quantize_acts(x.data(), static_cast<int>(m), w.k, q.data(), s.data(), sum.data(), int4_acts ? npu::kW4A4MaxCode : 127);
  std::vector<float> y(static_cast<size_t>(m * w.rows));
  ref::quant_matmul(quant_weights(w.view(), false),
                    {q.data(), s.data(), sum.data(), w.k, static_cast<int>(m), per_block ? x.data() : nullptr}, y.data(),
                    w.rows, 0, w.rows);
  return y;
}

// The CPU's fast kernels against their reference: bit for bit on the
// integer tiers, to float rounding on i8 (its blocks summed in another
// order: within 1e-5 of the largest output).
void expect_cpu_matches(Tier tier, const std::vector<float>& got, const std::vector<float>& want) {
  if (tier != Tier::kI8) {
    EXPECT_EQ(got, want);
    return;
  }
  ASSERT_EQ(got.size(), want.size());
  const float tol = testing::rounding_of(want);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << "at " << i;
}

// sqrt(sum (y - f)^2 / sum f^2) against the float product of the stored
// weights and the unquantized activations.
double relative_error_vs_float(const Weight& w, const std::vector<float>& x, int64_t m, const std::vector<float>& y) {
  double num = 0, den = 0;
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double f = 0;
      for (int64_t j = 0; j < w.k; ++j) f += static_cast<double>(w.dequant[static_cast<size_t>(r * w.k + j)]) * x[static_cast<size_t>(t * w.k + j)];
      const double d = y[static_cast<size_t>(t * w.rows + r)] - f;
      num += d * d;
      den += f * f;
    }
  }
  return std::sqrt(num / den);
}

VnpuOptions vnpu_options(int sessions, const std::string& profile = "hexagon-v75") {
  VnpuOptions o;
  o.profile = *npu::find_profile(profile);
  o.sessions = sessions;
  o.check_lines = true;
  return o;
}

// Stated bounds against the float product (weights as stored, activations
// unquantized): W8A8 (int8 per-token activations) and W4A4 (int4). Measured
// on these shapes (seeded): W8A8 at most 0.0073, W4A4 at most 0.130.
constexpr double kW8A8Bound = 0.01;
constexpr double kW4A4Bound = 0.16;

TEST(OpConsistency, EveryEngineAgreesWithTheReference) {
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 100, 37}, {3, 257, 130}, {17, 64, 129}, {64, 333, 96}, {40, 31, 200}};
  CpuEngine cpu_ref(CpuEngine::Kernels::kReference), cpu_fast(CpuEngine::Kernels::kFast);
  std::vector<std::unique_ptr<NpuEngine>> npus;
  for (int s = 1; s <= 4; ++s) npus.push_back(NpuEngine::create(vnpu_options(s)).value());
  VnpuOptions three_workers = vnpu_options(2, "rk3588");  // rk3588's 384 KiB CBUF: many small tiles
  three_workers.workers = 3;
  npus.push_back(NpuEngine::create(three_workers).value());
  uint32_t seed = 1;
  double worst_a8 = 0, worst_a4 = 0;
  for (Tier tier : {Tier::kI8, Tier::kI8s, Tier::kI4}) {
    for (const auto& [m, cols, n] : shapes) {
      SCOPED_TRACE(fmt::format("{} m={} cols={} n={}", tier_name(tier), m, cols, n));
      const Weight w = make_weight(tier, n, cols, seed++);
      const std::vector<float> x = make_acts(m, cols, w.k, seed++);
      const std::vector<float> want = reference(w, x, m, false);
      // The CPU's fast kernels: A8 activations (per 32 on i8), the integer
      // reference; its reference kernels: the float product of the stored
      // weights (f32 activations, the model's oracle).
      ASSERT_TRUE(cpu_ref.prepare({tier, m, w.k, n}).is_ok());
      EXPECT_LE(relative_error_vs_float(w, x, m, run(cpu_ref, w, x, m)), 1e-5);
      const std::vector<float> cpu_want = tier == Tier::kI8 ? reference(w, x, m, false, true) : want;
      expect_cpu_matches(tier, run(cpu_fast, w, x, m), cpu_want);
      // Scales per block lose no more than one per token. Where a row is one
      // block (k <= 32) the two are the same scales, and the products differ
      // only in where f32 multiplies by them: equal up to float rounding.
      EXPECT_LE(relative_error_vs_float(w, x, m, cpu_want), relative_error_vs_float(w, x, m, want) * (1 + 1e-6));
      worst_a8 = std::max(worst_a8, relative_error_vs_float(w, x, m, want));
      EXPECT_LE(relative_error_vs_float(w, x, m, want), kW8A8Bound);
      // vnpu: W8A8 reads i8/i8s and equals the A8 reference exactly; W4A4
      // reads i4 and equals the reference on its int4 activations exactly.
      const bool w4a4 = tier == Tier::kI4;
      const std::vector<float> npu_want = w4a4 ? reference(w, x, m, true) : want;
      for (auto& e : npus) {
        // prepare() builds the program: its descriptor lists read every
        // weight byte once per token block and write every output column once.
        const MatmulOp op{tier, m, w.k, n};
        ASSERT_TRUE(e->prepare(op).is_ok());
        const npu::KernelParams* prog = e->program(op).value();
        int64_t w_bytes = 0, out_cols = 0;
        for (const auto& loads : prog->tile_loads) {
          for (const npu::DmaTemplate& d : loads) w_bytes += d.row_bytes;
        }
        for (const npu::DmaTemplate& d : prog->tile_stores) out_cols += d.row_bytes / 4;
        EXPECT_EQ(w_bytes, static_cast<int64_t>(w.data.size() + 4 * w.scales.size()));
        EXPECT_EQ(out_cols, n);
        EXPECT_LE(prog->vtcm_bytes, e->device().options().profile.vtcm_bytes);
        const std::vector<float> got = run(*e, w, x, m);
        EXPECT_EQ(got, npu_want) << e->name();
        const double err = relative_error_vs_float(w, x, m, got);
        (w4a4 ? worst_a4 : worst_a8) = std::max(w4a4 ? worst_a4 : worst_a8, err);
        EXPECT_LE(err, w4a4 ? kW4A4Bound : kW8A8Bound) << e->name();
        EXPECT_EQ(e->device().lines()->conflicts(), 0u) << e->name();
      }
    }
  }
  std::printf("relative error vs the float product, worst over shapes: W8A8 %.4f (bound %.2f), W4A4 %.4f (bound %.2f)\n",
              worst_a8, kW8A8Bound, worst_a4, kW4A4Bound);
  // Every DMA push was popped, in every session, and nothing is in flight.
  for (auto& e : npus) {
    for (int s = 0; s < e->device().sessions(); ++s) {
      const npu::DmaQueue& q = e->device().session(s).dma();
      EXPECT_EQ(q.pushes(), q.pops()) << e->name() << " session " << s;
      EXPECT_EQ(q.outstanding(), 0) << e->name() << " session " << s;
    }
    EXPECT_GT(e->stats().program_cache_entries, 0u);
  }
}

TEST(Vnpu, SupportsAnswersFromStaticPropertiesAlone) {
  auto e = NpuEngine::create(vnpu_options(2)).value();
  const std::vector<MatmulOp> ops = {{Tier::kI8, 4, 64, 32},   {Tier::kI8s, 1, 2048, 2048}, {Tier::kI4, 7, 96, 5},
                                     {Tier::kNf4, 4, 64, 32},  {Tier::kI5, 4, 64, 32},      {Tier::kF16, 4, 64, 32},
                                     {Tier::kI8, 4, 1 << 23, 8}};
  std::vector<Support> before;
  for (const MatmulOp& op : ops) before.push_back(e->supports(op));
  EXPECT_TRUE(before[0].ok);
  EXPECT_TRUE(before[2].ok);
  EXPECT_TRUE(before[3].ok);  // nf4 reaches W8A8 through its int8 table
  EXPECT_FALSE(before[4].ok);
  EXPECT_NE(before[4].why.find("i5"), std::string::npos) << before[4].why;
  EXPECT_NE(before[6].why.find("VTCM"), std::string::npos) << before[6].why;  // 8 MiB of activations per token
  // Buffers now exist, are mapped and pinned: the answers do not move.
  const Weight w = make_weight(Tier::kI8, 32, 64, 9);
  (void)run(*e, w, make_acts(4, 64, w.k, 10), 4);
  for (size_t i = 0; i < ops.size(); ++i) {
    const Support again = e->supports(ops[i]);
    EXPECT_EQ(again.ok, before[i].ok) << i;
    EXPECT_EQ(again.why, before[i].why) << i;
  }
}

TEST(Vnpu, SessionsNeverShareAnOutputLine) {
  // Rows of 40 floats (160 bytes): chunks of 4 rows make 640 bytes, a
  // multiple of 128; 130 rows give 33 chunks over 3 sessions.
  auto e = NpuEngine::create(vnpu_options(3)).value();
  const Weight w = make_weight(Tier::kI8, 40, 96, 3);
  const auto params = *npu::make_kernel_params(CodeKind::kI8, npu::Datapath::kW8A8, 130, w.k, 40, 1 << 20);
  EXPECT_EQ(params.rows_per_chunk, 4);
  int64_t covered = 0;
  for (int s = 0; s < 3; ++s) {
    const auto r = e->device().partition(params, s);
    EXPECT_EQ(r.start, covered);
    EXPECT_EQ((r.start * 160) % 128, 0) << s;
    covered += r.count;
    EXPECT_GT(r.count, 0) << s;
  }
  EXPECT_EQ(covered, 130);
  const std::vector<float> x = make_acts(130, 96, w.k, 4);
  EXPECT_EQ(run(*e, w, x, 130), reference(w, x, 130, false));
  EXPECT_EQ(e->device().lines()->conflicts(), 0u);
  // Fewer chunks than sessions: session 0 does everything.
  const auto small = *npu::make_kernel_params(CodeKind::kI8, npu::Datapath::kW8A8, 5, w.k, 40, 1 << 20);
  EXPECT_EQ(e->device().partition(small, 0).count, 5);
  EXPECT_EQ(e->device().partition(small, 1).count, 0);
  EXPECT_EQ(e->device().partition(small, 2).count, 0);
  // The instrumentation does see a shared line.
  npu::LineOwnership lines;
  alignas(128) uint8_t buf[256];
  lines.record(0, buf, 100);
  lines.record(1, buf + 100, 60);
  EXPECT_EQ(lines.conflicts(), 1u);
}

TEST(Vnpu, AnErrorInOneSessionReachesEverySession) {
  auto e = NpuEngine::create(vnpu_options(3)).value();
  const Weight w = make_weight(Tier::kI8, 64, 64, 5);
  const std::vector<float> x = make_acts(48, 64, w.k, 6);
  e->fail_next_job_in(1);
  std::vector<float> y;
  const Status s = try_run(*e, w, x, 48, &y);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("session 1: injected failure"), std::string::npos) << s.to_string();
  // The next job runs normally: the fence sequence numbers moved on together.
  EXPECT_EQ(run(*e, w, x, 48), reference(w, x, 48, false));
}

TEST(Vnpu, EverySessionObservesAPeersError) {
  auto dev = npu::Vnpu::create(vnpu_options(4)).value();
  const Weight w = make_weight(Tier::kI8, 32, 64, 7);
  const auto p = *npu::make_kernel_params(CodeKind::kI8, npu::Datapath::kW8A8, 64, w.k, 32, dev->options().profile.vtcm_bytes);
  std::vector<int8_t> acts(static_cast<size_t>(64 * w.k), 1);
  std::vector<float> scales(64, 1.0f), out(64 * 32);
  std::vector<int32_t> sums(64, static_cast<int32_t>(w.k));
  ASSERT_TRUE(dev->pin(acts.data(), static_cast<int64_t>(acts.size())).is_ok());
  ASSERT_TRUE(dev->pin(scales.data(), 256).is_ok());
  ASSERT_TRUE(dev->pin(sums.data(), 256).is_ok());
  ASSERT_TRUE(dev->pin(out.data(), static_cast<int64_t>(out.size() * 4)).is_ok());
  npu::DeviceJob j;
  j.p = &p;
  const QuantWeights qw = quant_weights(w.view());
  j.w0 = qw.p0;
  j.w_scales = qw.scales;
  j.acts = acts.data();
  j.act_scales = scales.data();
  j.act_sums = sums.data();
  j.out = out.data();
  j.fail_session = 2;
  auto js = dev->submit(j);
  EXPECT_FALSE(dev->wait(*js).is_ok());
  for (int s = 0; s < 4; ++s) {
    EXPECT_FALSE(js->observed[static_cast<size_t>(s)].is_ok()) << "session " << s << " did not see the error";
    EXPECT_NE(js->observed[static_cast<size_t>(s)].message().find("session 2"), std::string::npos) << s;
  }
}

TEST(Vnpu, PacedFencesWaitForTheModeledTime) {
  VnpuOptions o = vnpu_options(1);
  o.profile.int8_tops = 1e-6;  // 2 * 8 * 64 * 64 ops take 65 ms at 1 MOPS
  o.paced = true;
  auto e = NpuEngine::create(o).value();
  const Weight w = make_weight(Tier::kI8, 64, 64, 11);
  const std::vector<float> x = make_acts(8, 64, w.k, 12);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> y;
  bool done_at_once = true;
  ASSERT_TRUE(try_run(*e, w, x, 8, &y, &done_at_once).is_ok());
  EXPECT_FALSE(done_at_once);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 60.0);
  EXPECT_GE(e->stats().modeled_device_us, 65000.0);
  EXPECT_EQ(y, reference(w, x, 8, false));
}

// One token through the CPU's decode loop: input_ready hands on each job's
// input as the CPU quantized it (padded, rotated, int8), before any row is
// computed; an engine without such a loop says it made none. One thread:
// the inputs are handed on while the engine's other threads start on the
// rows (batch.cc), so "before any row" is certain only when the caller's
// thread is the only one (the pool runs the lead first).
TEST(Engines, InputReadyHandsOnTheCpusCodesBeforeTheRows) {
  const Weight a = make_weight(Tier::kI8s, 40, 100, 21), b = make_weight(Tier::kI4, 24, 100, 22);
  std::vector<WeightView> views = {a.weight(), b.weight()};
  for (WeightView& v : views) {
    v.rotation_block = 32;
    v.rotation_seed = 5;
  }
  const std::vector<float> x = make_acts(1, 100, 100, 23);
  std::vector<std::vector<float>> y(2);
  std::vector<MatmulJob> jobs(2);
  for (size_t i = 0; i < 2; ++i) {
    y[i].assign(static_cast<size_t>(views[i].rows), -1.0f);
    jobs[i].op = MatmulOp::of(views[i], 1);
    jobs[i].w = views[i];
    jobs[i].x = x.data();
    jobs[i].y = y[i].data();
    jobs[i].ldy = views[i].rows;
  }
  // What the codes must be: pad_rotate_quantize of x in the weights' basis.
  RotationSigns signs;
  std::vector<float> f32(static_cast<size_t>(a.k));
  std::vector<int8_t> want(static_cast<size_t>(a.k));
  float want_scale = 0;
  int32_t want_sum = 0;
  pad_rotate_quantize(x.data(), 1, 100, a.k, 32, signs.get(a.k, 5), f32.data(), want.data(), &want_scale, &want_sum);
  ThreadPool one(1);
  CpuEngine fast(CpuEngine::Kernels::kFast, &one), slow(CpuEngine::Kernels::kReference, &one);
  for (CpuEngine* e : {&fast, &slow}) {
    std::vector<int> seen;
    bool rows_untouched = true;
    auto ready = [&](int i, const QuantizedToken* xq) {
      seen.push_back(i);
      rows_untouched = rows_untouched && y[static_cast<size_t>(i)][0] == -1.0f;
      if (e == &slow) {
        EXPECT_EQ(xq, nullptr);
        return;
      }
      ASSERT_NE(xq, nullptr);
      EXPECT_EQ(xq->k, a.k);
      EXPECT_EQ(std::vector<int8_t>(xq->codes, xq->codes + xq->k), want) << "job " << i;
      EXPECT_EQ(xq->scale, want_scale);
      EXPECT_EQ(xq->sum, want_sum);
    };
    for (auto& r : y) r.assign(r.size(), -1.0f);
    auto fence = e->submit(MatmulBatch{jobs, 0, nullptr, ready});
    ASSERT_TRUE(fence.is_ok());
    ASSERT_TRUE(Engine::wait(*fence).is_ok());
    EXPECT_EQ(seen, (std::vector<int>{0, 1})) << e->name();
    EXPECT_TRUE(rows_untouched) << e->name();
    EXPECT_NE(y[1][0], -1.0f) << e->name();
  }
}

// The NPU reads codes handed to it exactly as it reads the codes it makes;
// codes in another basis (another K) are not read.
TEST(Vnpu, ReadsCodesHandedToItAsItsOwn) {
  const Weight w = make_weight(Tier::kI8s, 70, 100, 31);
  WeightView view = w.weight();
  view.rotation_block = 32;
  view.rotation_seed = 9;
  const std::vector<float> x = make_acts(1, 100, 100, 32);
  RotationSigns signs;
  std::vector<float> f32(static_cast<size_t>(w.k));
  std::vector<int8_t> codes(static_cast<size_t>(w.k));
  QuantizedToken xq;
  pad_rotate_quantize(x.data(), 1, 100, w.k, 32, signs.get(w.k, 9), f32.data(), codes.data(), &xq.scale, &xq.sum);
  xq.codes = codes.data();
  xq.k = w.k;
  auto e = NpuEngine::create(vnpu_options(2)).value();
  auto run_with = [&](const QuantizedToken* q) {
    std::vector<float> y(static_cast<size_t>(w.rows), -1.0f);
    MatmulJob job;
    job.op = MatmulOp::of(view, 1);
    job.w = view;
    job.x = x.data();
    job.xq = q;
    job.y = y.data();
    job.ldy = w.rows;
    auto fence = e->submit(job);
    EXPECT_TRUE(fence.is_ok());
    EXPECT_TRUE(Engine::wait(*fence).is_ok());
    return y;
  };
  const std::vector<float> own = run_with(nullptr);
  EXPECT_EQ(run_with(&xq), own);
  // Read: other codes, another result.
  std::vector<int8_t> other(codes.size(), 1);
  QuantizedToken wrong = xq;
  wrong.codes = other.data();
  EXPECT_NE(run_with(&wrong), own);
  // Another basis: not read.
  wrong.k = w.k + 32;
  EXPECT_EQ(run_with(&wrong), own);
}

// A decode step submits dozens of jobs: a finished job's state is made
// over for the next, but only when nothing else (a fence) still holds it.
TEST(Vnpu, AJobsStateIsMadeOverOnlyWhenNothingHoldsIt) {
  VnpuOptions o = vnpu_options(1);
  o.compute = false;
  auto e = NpuEngine::create(o).value();
  auto p = e->program({Tier::kI8, 1, 64, 64});
  ASSERT_TRUE(p.is_ok());
  const uint8_t weights[1] = {0};
  npu::DeviceJob dj;
  dj.p = *p;
  dj.w0 = weights;
  std::shared_ptr<npu::JobState> first = e->device().submit(dj);
  std::shared_ptr<npu::JobState> held = first;  // as a live fence holds it
  const npu::JobState* first_state = first.get();
  std::shared_ptr<npu::JobState> second = e->device().submit(dj, std::move(first));
  EXPECT_NE(second.get(), first_state);
  EXPECT_EQ(held.get(), first_state);
  const npu::JobState* second_state = second.get();
  const uint64_t second_id = second->job.id;
  std::shared_ptr<npu::JobState> third = e->device().submit(dj, std::move(second));
  EXPECT_EQ(third.get(), second_state);
  EXPECT_GT(third->job.id, second_id);
  EXPECT_TRUE(e->device().wait(*third).is_ok());
}

TEST(Vnpu, WeightsBeyondTheWindowAreMappedOnDemand) {
  // Ten 64 KiB weights through a 256 KiB window: each job maps its weight,
  // evicting the least recently used; pinned staging stays.
  VnpuOptions o = vnpu_options(2);
  o.window_bytes = 256 << 10;
  auto e = NpuEngine::create(o).value();
  std::vector<Weight> ws;
  for (int i = 0; i < 10; ++i) ws.push_back(make_weight(Tier::kI8, 256, 256, 20 + i));
  const std::vector<float> x = make_acts(8, 256, 256, 40);
  for (int pass = 0; pass < 2; ++pass) {
    for (const Weight& w : ws) EXPECT_EQ(run(*e, w, x, 8), reference(w, x, 8, false));
  }
  const auto st = e->stats();
  EXPECT_GT(st.evictions, 0u);
  EXPECT_GE(st.maps, 2u * 10u * 2u);  // every weight mapped again on the second pass (2 buffers each, 2 sessions)
  for (int s = 0; s < 2; ++s) {
    const auto w = e->device().session(s).window().stats();
    EXPECT_LE(w.peak_bytes, 256 << 10);
    EXPECT_GT(w.pinned_bytes, 0);
  }
  // A weight that can never fit is a clear error.
  const Weight big = make_weight(Tier::kI8, 1200, 256, 50);
  std::vector<float> y;
  const Status s = try_run(*e, big, x, 8, &y);
  EXPECT_NE(s.message().find("address window"), std::string::npos) << s.to_string();
}

TEST(Vnpu, TraceFileLoadsAsChromeTraceEvents) {
  Trace trace;
  VnpuOptions o = vnpu_options(2);
  o.trace = &trace;
  {
    auto e = NpuEngine::create(o).value();
    const Weight w = make_weight(Tier::kI4, 200, 64, 60);
    (void)run(*e, w, make_acts(16, 64, w.k, 61), 16);
  }
  const std::string path = ::testing::TempDir() + "/vnpu_trace.json";
  ASSERT_TRUE(trace.write_json(path).is_ok());
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::map<std::string, int> names;
  for (const auto& ev : j.at("traceEvents")) {
    if (ev.at("ph") != "X") continue;
    ++names[ev.at("name").get<std::string>()];
    EXPECT_TRUE(ev.at("args").contains("progress"));
    EXPECT_GE(ev.at("dur").get<double>(), 0.0);
  }
  for (const char* want : {"dma_push", "dma_wait", "compute", "fence", "flush", "map", "submit"}) {
    EXPECT_GT(names[want], 0) << want;
  }
}

TEST(Vnpu, ProfilesNameTheirSources) {
  for (const char* name : {"rk3588", "hexagon-v75", "hexagon-v79"}) {
    auto p = npu::find_profile(name);
    ASSERT_TRUE(p.is_ok()) << name;
    EXPECT_GT(p->int8_tops, 0);
    EXPECT_GT(p->vtcm_bytes, 0);
  }
  EXPECT_NE(npu::find_profile("tpu").status().message().find("rk3588"), std::string::npos);
  std::ifstream in(std::string(ORK_SOURCE_DIR) + "/data/npu_profiles.txt");
  std::string line;
  int figures = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == '[') continue;
    ++figures;
    const size_t hash = line.find('#');
    ASSERT_NE(hash, std::string::npos) << "no source: " << line;
    EXPECT_GT(line.size() - hash, 8u) << "no source: " << line;
  }
  EXPECT_EQ(figures, 3 * 12);
  EXPECT_NE(npu::parse_profiles("[x]\ncores = two\n", "t").status().message().find("t:2"), std::string::npos);
  EXPECT_FALSE(npu::parse_npu_spec("vnpu:rk3588:sessions=0").is_ok());
  auto spec = npu::parse_npu_spec("vnpu:hexagon-v79:sessions=3:window=16:paced");
  ASSERT_TRUE(spec.is_ok()) << spec.status().to_string();
  EXPECT_EQ(spec->sessions, 3);
  EXPECT_EQ(spec->window_bytes, 16 << 20);
  EXPECT_TRUE(spec->paced);
}

}  // namespace
}  // namespace ork
