// End to end: real and synthetic models with prefill on vnpu, against the
// CPU path; a model larger than the device's address window.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>

#include "engines/npu/npu_engine.h"
#include "format/gguf/gguf.h"
#include "model/forward.h"
#include "model/overlay_reach.h"
#include "model/synth.h"
#include "quant/packer.h"
#include "testdata.h"

namespace ork {
namespace {

using npu::NpuEngine;

std::string pack_uniform(const std::string& in, const std::string& tier, const std::string& name) {
  PackOptions o;
  o.input = in;
  o.output = ::testing::TempDir() + "/" + name + ".orkpack";
  o.rules = {*parse_tier_rule(".=" + tier)};
  auto r = pack_model(o);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return o.output;
}

const std::vector<int32_t> kPrompt = {1, 80, 147, 201, 282, 57, 300, 100, 14, 77, 5, 9, 300, 41, 2, 17};

// Prefill of the prompt, then one decoded token; logits of both steps.
// Every prefill matmul the NPU reads goes to it (the routing is tested in
// dispatch_test.cc); decode stays on the CPU.
DispatchOptions on_npu() {
  DispatchOptions o;
  o.force_prefill = Route::kNpu;
  return o;
}

std::vector<float> logits(const Model& model, NpuEngine* npu, DispatchStats* stats = nullptr, bool fast = true) {
  Context ctx(model, 64);
  ctx.set_fast_kernels(fast);
  ctx.set_npu(npu, on_npu());
  auto a = ctx.eval(kPrompt);
  EXPECT_TRUE(a.is_ok());
  auto b = ctx.eval(std::vector<int32_t>{3});
  EXPECT_TRUE(b.is_ok());
  if (stats != nullptr) *stats = ctx.dispatch_stats();
  std::vector<float> out = *a;
  out.insert(out.end(), b->begin(), b->end());
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
  return d;
}

npu::VnpuOptions options(int sessions) {
  npu::VnpuOptions o;
  o.profile = *npu::find_profile("hexagon-v75");
  o.sessions = sessions;
  return o;
}

// W8A8 on vnpu is exactly the integer reference on int8 activations per
// token (OpConsistency, DispatchConsistency: bit for bit, split rows too);
// the CPU's fast kernels take i8's activations with a scale per 32, so a
// model's logits with prefill on vnpu differ from the CPU's by that
// rounding alone: relative error within kW8A8VsCpuBound (measured 0.020 on
// tinystories656K, 0.0042 on stories260K, 0.022 on the window's model).
// Two runs of the same datapath agree to kW8A8LogitBound (summation order).
constexpr double kW8A8LogitBound = 1e-4;
constexpr double kW8A8VsCpuBound = 0.03;

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

TEST(NpuModel, RealModelsPrefillOnVnpuMatchTheCpu) {
  for (const char* file : {"models/tinystories656K-f32.gguf", "models/stories260K-f32.gguf"}) {
    ORK_REQUIRE_TESTDATA(file);
    const std::string packed = pack_uniform(testing::testdata(file), "i8", "npu_e2e");
    auto model = Model::load(packed);
    ASSERT_TRUE(model.is_ok()) << model.status().to_string();
    const std::vector<float> cpu = logits(**model, nullptr);
    auto e = NpuEngine::create(options(2)).value();
    DispatchStats st;
    const std::vector<float> npu = logits(**model, e.get(), &st);
    const uint64_t on = st.prefill[static_cast<size_t>(Route::kNpu)];
    EXPECT_GT(on, 0u) << file;
    EXPECT_EQ(st.npu_refused, 0u) << file;
    EXPECT_LE(relative_error(npu, cpu), kW8A8VsCpuBound) << file;
    std::printf("%s i8, prefill on vnpu: relative logit error %.4f vs the CPU (max |logit - cpu| %.3g over %zu logits, "
                "%llu matmuls on vnpu)\n", file, relative_error(npu, cpu), max_abs_diff(cpu, npu), cpu.size(),
                static_cast<unsigned long long>(on));
  }
}

// On i8 the CPU's fast kernels quantize activations per 32 and vnpu's W8A8
// per token: prefill on vnpu is the coarser datapath. Against the reference
// kernels (f32 activations) the CPU's logits are the nearer, and vnpu's
// stay within kW8A8VsCpuBound of the CPU's.
TEST(NpuModel, I8PrefillOnVnpuIsPerToken) {
  const char* file = "models/tinystories656K-f32.gguf";
  ORK_REQUIRE_TESTDATA(file);
  const std::string packed = pack_uniform(testing::testdata(file), "i8", "npu_i8");
  auto model = Model::load(packed);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const std::vector<float> exact = logits(**model, nullptr, nullptr, false);
  const std::vector<float> cpu = logits(**model, nullptr);
  auto e = NpuEngine::create(options(2)).value();
  DispatchStats st;
  const std::vector<float> npu = logits(**model, e.get(), &st);
  EXPECT_GT(st.prefill[static_cast<size_t>(Route::kNpu)], 0u);
  EXPECT_GT(max_abs_diff(cpu, npu), kW8A8LogitBound);  // vnpu ran its own datapath
  EXPECT_LT(relative_error(cpu, exact), relative_error(npu, exact));
  EXPECT_LE(relative_error(npu, cpu), kW8A8VsCpuBound);
  std::printf("tinystories656K i8: relative logit error vs f32 activations: CPU (per 32) %.4f, prefill on vnpu (per token) "
              "%.4f; vnpu vs CPU %.4f\n",
              relative_error(cpu, exact), relative_error(npu, exact), relative_error(npu, cpu));
}

TEST(NpuModel, W4A4PrefillStaysCloseToTheCpu) {
  const char* file = "models/tinystories656K-f32.gguf";
  ORK_REQUIRE_TESTDATA(file);
  const std::string packed = pack_uniform(testing::testdata(file), "i4", "npu_w4a4");
  auto model = Model::load(packed);
  ASSERT_TRUE(model.is_ok());
  const std::vector<float> cpu = logits(**model, nullptr);
  auto e = NpuEngine::create(options(3)).value();
  const std::vector<float> npu = logits(**model, e.get());
  // int4 activations cost accuracy: the logits move, within a stated bound
  // relative to their size (measured 0.197 here).
  EXPECT_LE(relative_error(npu, cpu), 0.25);
  std::printf("tinystories656K i4, W4A4 prefill on vnpu: relative logit error %.4f vs the CPU's W4A8\n", relative_error(npu, cpu));
  EXPECT_GT(max_abs_diff(cpu, npu), 0.0);  // it did run W4A4, not the CPU path
}

TEST(NpuModel, AModelLargerThanTheWindowGivesTheSameLogits) {
  // 15.7 M parameters at i8: 16 MB of weights through an 8 MiB window.
  SynthOptions so;
  so.n_embd = 512;
  so.n_layer = 4;
  so.n_head = 8;
  so.n_head_kv = 4;
  so.n_ff = 1536;
  so.n_vocab = 2048;
  so.tied = false;
  const std::string gguf = ::testing::TempDir() + "/npu_window.gguf";
  ASSERT_TRUE(synth_write_file(so, gguf).is_ok());
  const std::string packed = pack_uniform(gguf, "i8", "npu_window");
  auto model = Model::load(packed);
  ASSERT_TRUE(model.is_ok());
  ASSERT_GT(model->get()->dense_bytes_per_token(), uint64_t{12} << 20);

  auto large = NpuEngine::create(options(2)).value();
  const std::vector<float> want = logits(**model, large.get());
  EXPECT_EQ(large->stats().evictions, 0u);
  const double vs_cpu = relative_error(want, logits(**model, nullptr));  // and the CPU path agrees
  EXPECT_LE(vs_cpu, kW8A8VsCpuBound);
  std::printf("window model i8, prefill on vnpu: relative logit error %.4f vs the CPU\n", vs_cpu);

  npu::VnpuOptions small_o = options(2);
  small_o.window_bytes = 8 << 20;
  auto small = NpuEngine::create(small_o).value();
  DispatchStats st;
  const std::vector<float> got = logits(**model, small.get(), &st);
  EXPECT_GT(st.prefill[static_cast<size_t>(Route::kNpu)], 0u);
  EXPECT_EQ(got, want);
  const auto s = small->stats();
  EXPECT_GT(s.evictions, 0u);
  std::printf("vnpu 8 MiB window: %llu maps, %llu evictions (3.5 GiB window: %llu maps, 0 evictions)\n",
              static_cast<unsigned long long>(s.maps), static_cast<unsigned long long>(s.evictions),
              static_cast<unsigned long long>(large->stats().maps));
  for (int i = 0; i < small->device().sessions(); ++i) {
    const auto w = small->device().session(i).window().stats();
    EXPECT_LE(w.peak_bytes, int64_t{8} << 20);
  }
  // Pinned buffers (the KV cache among them) were never evicted: a Context
  // pins its cache, runs, and finds it still mapped in every session.
  Context ctx(**model, 64);
  ctx.set_npu(small.get(), on_npu());
  ASSERT_TRUE(ctx.eval(kPrompt).is_ok());
  std::vector<int64_t> pinned_before;
  for (int i = 0; i < small->device().sessions(); ++i) pinned_before.push_back(small->device().session(i).window().stats().pinned_bytes);
  const uint64_t evictions_before = small->stats().evictions;
  ASSERT_TRUE(ctx.eval(kPrompt).is_ok());
  EXPECT_GT(small->stats().evictions, evictions_before);  // the weights went round the window again
  for (int i = 0; i < small->device().sessions(); ++i) {
    EXPECT_EQ(small->device().session(i).window().stats().pinned_bytes, pinned_before[static_cast<size_t>(i)]);
    EXPECT_GT(pinned_before[static_cast<size_t>(i)], 64 * 4 * 512);  // the KV cache's share
  }
}

}  // namespace
}  // namespace ork

namespace ork {
namespace {

// The overlay end to end on a real MoE model whose routed experts' down
// projections and attention values are i8s: decoding with every overlay
// hit gives the logits of the CPU reading both planes, bit for bit; with
// every miss, those of the CPU reading the high plane alone. Routed
// experts, q/k/v groups and single matmuls all take part.
TEST(NpuOverlay, DecodeWithEveryHitOrEveryMissMatchesTheCpuReadings) {
  const char* file = "models/sotu-moe-f32.gguf";
  ORK_REQUIRE_TESTDATA(file);
  PackOptions po;
  po.input = testing::testdata(file);
  po.output = ::testing::TempDir() + "/sotu-i8s.orkpack";
  po.rules = {*parse_tier_rule(".=i4"), *parse_tier_rule("attn_v|attn_output|ffn_down_exps|ffn_gate_exps=i8s")};
  ASSERT_TRUE(pack_model(po).is_ok());
  auto model = Model::load(po.output);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  const std::vector<int32_t> ids = {1, 111, 89, 352, 1194, 40, 7, 300, 52, 9};
  auto decode = [&](NpuEngine* npu, const DispatchOptions& o, bool high_only, DispatchStats* stats) {
    Context ctx(**model, 32);
    if (npu != nullptr) ctx.set_npu(npu, o);
    ctx.set_i8s_high_only(high_only);
    std::vector<float> all, logits;
    for (int32_t id : ids) {
      EXPECT_TRUE(ctx.eval(std::span<const int32_t>(&id, 1), logits).is_ok());
      all.insert(all.end(), logits.begin(), logits.end());
    }
    if (stats != nullptr) *stats = ctx.dispatch_stats();
    ctx.set_npu(nullptr);
    return all;
  };
  const std::vector<float> both = decode(nullptr, {}, false, nullptr), high = decode(nullptr, {}, true, nullptr);
  ASSERT_NE(both, high);
  auto e = NpuEngine::create(options(2)).value();
  for (double rate : {1.0, 0.0}) {
    DispatchOptions o;
    o.clock = OverlayClock::kForced;
    o.hit_rate = rate;
    DispatchStats st;
    const std::vector<float> got = decode(e.get(), o, false, &st);
    EXPECT_EQ(got, rate > 0 ? both : high) << "hit rate " << rate;
    // Per token and layer: v and o, two routed experts' gate and down.
    EXPECT_EQ(st.decode[static_cast<size_t>(Route::kOverlay)], ids.size() * 4 * (2 + 2 * 2));
    EXPECT_EQ(st.overlay_hits + st.overlay_misses, st.decode[static_cast<size_t>(Route::kOverlay)]);
    EXPECT_EQ(st.overlay_hits, rate > 0 ? st.decode[static_cast<size_t>(Route::kOverlay)] : 0u);
  }
  // Half the jobs: between the two readings, and the same every run.
  DispatchOptions half;
  half.clock = OverlayClock::kForced;
  half.hit_rate = 0.5;
  const std::vector<float> mixed = decode(e.get(), half, false, nullptr);
  EXPECT_NE(mixed, both);
  EXPECT_NE(mixed, high);
  EXPECT_EQ(decode(e.get(), half, false, nullptr), mixed);

  // A share per tensor role (the forced clock's per-role rates, counted by
  // role): v and the experts' downs always hit, o and the gates never.
  DispatchOptions by_role;
  by_role.clock = OverlayClock::kForced;
  by_role.hit_rate = 0.0;
  by_role.role_hit_rates = {{"attn_v", 1.0}, {"ffn_down_exps", 1.0}};
  DispatchStats st;
  const std::vector<float> some = decode(e.get(), by_role, false, &st);
  EXPECT_NE(some, both);
  EXPECT_NE(some, high);
  const uint64_t steps = ids.size() * 4;  // tokens x layers
  ASSERT_EQ(st.roles.size(), 4u);
  uint64_t hits = 0;
  for (const OverlayRoleCount& r : st.roles) {
    const bool expert = r.role.ends_with("_exps");
    EXPECT_EQ(r.candidates, expert ? 2 * steps : steps) << r.role;
    EXPECT_EQ(r.hits, r.role == "attn_v" || r.role == "ffn_down_exps" ? r.candidates : 0u) << r.role;
    hits += r.hits;
  }
  EXPECT_EQ(hits, st.overlay_hits);
  // The virtual clock counts by role too: every candidate once, as a hit,
  // a miss or not opened.
  DispatchOptions modeled;
  modeled.clock = OverlayClock::kVirtual;
  decode(e.get(), modeled, false, &st);
  uint64_t candidates = 0;
  hits = 0;
  for (const OverlayRoleCount& r : st.roles) {
    candidates += r.candidates;
    hits += r.hits;
  }
  EXPECT_EQ(candidates, steps * (2 + 2 * 2));
  EXPECT_EQ(candidates, st.overlay_hits + st.overlay_misses + st.overlay_skipped + st.overlay_over_budget);
  EXPECT_EQ(hits, st.overlay_hits);
}

}  // namespace
}  // namespace ork

namespace ork {
namespace {

// A device that computes nothing and predicts each job to take `factor`
// times the CPU's read of the weight's high plane at `gbps` (so a job
// alone never lands in time, and in a group it depends on the members).
class Proportional final : public Engine {
 public:
  class Done final : public Fence {
   public:
    bool done() const override { return true; }
    Status wait() override { return Status::ok(); }
  };
  Proportional(double factor, double gbps) : factor_(factor), gbps_(gbps) {}
  std::string name() const override { return "proportional"; }
  Support supports(const MatmulOp&) const override { return Support::yes(); }
  Status prepare(const MatmulOp&) override { return Status::ok(); }
  Result<FencePtr> submit(const MatmulJob&) override { return FencePtr(std::make_shared<Done>()); }
  double predict_us(const MatmulOp& op) const override {
    return factor_ * static_cast<double>(op.n) * (static_cast<double>(op.k) / 2.0 + 4.0) / (gbps_ * 1e3);
  }

 private:
  double factor_, gbps_;
};

// The planner's estimate of the overlay's reach (model/overlay_reach.h)
// against the virtual clock's own count, decoding real models packed with
// an i8s set: the same share for every tensor role, dense groups and
// routed experts alike, and not all 0 or 1.
TEST(OverlayReach, IsTheVirtualClocksCountBeforeAnyPackExists) {
  for (const char* file : {"models/tinystories656K-f32.gguf", "models/sotu-moe-f32.gguf"}) {
    ORK_REQUIRE_TESTDATA(file);
    const std::string overlaid = "attn_k|attn_v|attn_output|ffn_up|ffn_down";
    PackOptions po;
    po.input = testing::testdata(file);
    po.output = ::testing::TempDir() + "/reach.orkpack";
    po.rules = {*parse_tier_rule(".=i4"), *parse_tier_rule(overlaid + "=i8s")};
    ASSERT_TRUE(pack_model(po).is_ok());
    auto model = Model::load(po.output);
    ASSERT_TRUE(model.is_ok()) << model.status().to_string();
    // 1.5: v, k, a dense up, the routed ups all in time and half the
    // downs; 2.5: k's job keeps the device from v's, half the routed ups.
    for (double factor : {1.5, 2.5}) {
      constexpr double kGbps = 20;
      Proportional npu(factor, kGbps);
      DispatchOptions o;
      o.clock = OverlayClock::kVirtual;
      o.prefill = false;
      o.device_cpu_gbps = kGbps;
      Context ctx(**model, 32);
      ctx.set_npu(&npu, o);
      std::vector<float> logits;
      for (int32_t id : {1, 111, 89, 352, 1194, 40}) ASSERT_TRUE(ctx.eval(std::span<const int32_t>(&id, 1), logits).is_ok());
      const DispatchStats st = ctx.dispatch_stats();
      ctx.set_npu(nullptr);

      auto gguf = GgufFile::open(po.input);
      ASSERT_TRUE(gguf.is_ok());
      const std::regex set(overlaid);
      ReachOptions ro;
      ro.cpu_gbps = kGbps;
      ro.overlaid = [&](const std::string& t) { return std::regex_search(t, set); };
      auto reach = overlay_reach(*gguf, npu, ro);
      ASSERT_TRUE(reach.is_ok()) << reach.status().to_string();
      std::map<std::string, std::pair<double, int>> by_role;
      for (const auto& [name, share] : *reach) {
        if (!ro.overlaid(name)) continue;
        auto& r = by_role[std::string(overlay_role(name.c_str()))];
        r.first += share;
        ++r.second;
      }
      ASSERT_EQ(by_role.size(), st.roles.size()) << file;
      bool partial = false;
      for (const OverlayRoleCount& r : st.roles) {
        ASSERT_TRUE(by_role.count(r.role)) << file << ": " << r.role;
        EXPECT_NEAR(by_role[r.role].first / by_role[r.role].second, r.coverage(), 1e-9) << file << ": " << r.role;
        partial |= r.coverage() > 0;
      }
      EXPECT_TRUE(partial) << file << ": no role reached; the check compares nothing but zeros";
      for (const char* alone : {"attn_output", "ffn_down"}) {
        for (const OverlayRoleCount& r : st.roles) {
          if (r.role == alone) {
            EXPECT_EQ(r.hits, 0u) << file << ": " << alone << " is consumed as soon as it is made";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ork
