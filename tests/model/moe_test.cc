// Mixture of experts: routing against hand-computed cases, and for every
// MoE architecture a dense model whose FFN is copied into identical experts
// must give the dense model's logits (the routing weights then sum to 1).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/half.h"
#include "core/thread_pool.h"
#include "format/orkpack/orkpack.h"
#include "model/moe.h"
#include "model/rewrite.h"
#include "quant/packer.h"
#include "testdata.h"

namespace ork {
namespace {

using testing::ExtraTensor;
using testing::logits;
using testing::max_abs_diff;
using testing::rewrite;
constexpr const char* kModel = testing::kRewriteModel;

TEST(Route, SoftmaxTopKAndRenormalisation) {
  // logits 0, ln 2, ln 4, ln 1 -> p = 1/8, 2/8, 4/8, 1/8.
  const float logits4[4] = {0.0f, std::log(2.0f), std::log(4.0f), 0.0f};
  int32_t ids[4];
  float w[4];
  route_token(logits4, 4, 2, /*renormalise=*/false, ids, w);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 1);
  EXPECT_NEAR(w[0], 0.5f, 1e-6f);
  EXPECT_NEAR(w[1], 0.25f, 1e-6f);
  route_token(logits4, 4, 2, /*renormalise=*/true, ids, w);
  EXPECT_NEAR(w[0], 2.0f / 3.0f, 1e-6f);
  EXPECT_NEAR(w[1], 1.0f / 3.0f, 1e-6f);
  // Ties go to the lower index; k = n gives every expert.
  route_token(logits4, 4, 3, false, ids, w);
  EXPECT_EQ(ids[2], 0);
  int32_t all[4];
  float wa[4];
  route_token(logits4, 4, 4, false, all, wa);
  EXPECT_EQ(all[3], 3);
  EXPECT_NEAR(wa[0] + wa[1] + wa[2] + wa[3], 1.0f, 1e-6f);
  // Large logits do not overflow (max subtracted first).
  const float big[3] = {1000.0f, 999.0f, -1000.0f};
  route_token(big, 3, 1, true, ids, w);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(w[0], 1.0f);
}

bool is_ffn(const std::string& name) {
  return name.find("ffn_gate.weight") != std::string::npos || name.find("ffn_up.weight") != std::string::npos ||
         name.find("ffn_down.weight") != std::string::npos;
}

// The base model's dense FFN tensors become [.., .., n_expert] stacks of
// identical copies (down scaled by `down_scale`), with a random router.
// Returns the extra tensors and the metadata keys of an MoE model.
struct MoeParts {
  std::vector<ExtraTensor> tensors;
  std::vector<std::pair<std::string, GgufValue>> keys;
};

MoeParts expertise(const GgufFile& src, const std::string& arch, int n_expert, int n_used, float down_scale) {
  MoeParts parts;
  const ModelConfig c = *read_model_config(src);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const GgufTensorInfo& t : src.tensors()) {
    if (!is_ffn(t.name)) continue;
    std::vector<float> one(t.elems);
    std::memcpy(one.data(), t.data, t.bytes);
    const bool down = t.name.find("ffn_down") != std::string::npos;
    if (down) {
      for (float& v : one) v *= down_scale;
    }
    std::vector<float> stack;
    for (int e = 0; e < n_expert; ++e) stack.insert(stack.end(), one.begin(), one.end());
    std::string name = t.name;
    name.replace(name.find(".weight"), 7, "_exps.weight");
    parts.tensors.push_back({name, {t.dims[0], t.dims[1], static_cast<uint64_t>(n_expert)}, std::move(stack)});
  }
  for (int l = 0; l < c.n_layer; ++l) {
    std::vector<float> router(static_cast<size_t>(c.n_embd) * n_expert);
    for (float& v : router) v = normal(rng);
    parts.tensors.push_back({"blk." + std::to_string(l) + ".ffn_gate_inp.weight",
                             {static_cast<uint64_t>(c.n_embd), static_cast<uint64_t>(n_expert)}, std::move(router)});
  }
  parts.keys = {{arch + ".expert_count", GgufValue::make_uint32(static_cast<uint32_t>(n_expert))},
                {arch + ".expert_used_count", GgufValue::make_uint32(static_cast<uint32_t>(n_used))},
                {arch + ".expert_feed_forward_length", GgufValue::make_uint32(static_cast<uint32_t>(c.n_ff))}};
  return parts;
}

std::vector<std::pair<std::string, std::vector<float>>> qk_norms(const ModelConfig& c, bool whole) {
  std::vector<std::pair<std::string, std::vector<float>>> v;
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    std::vector<float> q(static_cast<size_t>(whole ? c.q_dim() : c.head_dim)),
        k(static_cast<size_t>(whole ? c.kv_dim() : c.head_dim));
    for (size_t i = 0; i < q.size(); ++i) q[i] = 0.5f + 0.05f * static_cast<float>(i % 7);
    for (size_t i = 0; i < k.size(); ++i) k[i] = 0.6f + 0.03f * static_cast<float>(i % 5);
    v.push_back({p + "attn_q_norm.weight", q});
    v.push_back({p + "attn_k_norm.weight", k});
  }
  return v;
}

void expect_same_logits(const Model& dense, const Model& moe, const char* what) {
  for (bool fast : {false, true}) {
    const float d = max_abs_diff(logits(dense, fast), logits(moe, fast));
    // Reference path: f64 sums, reordered only by the routing weights (sum
    // 1 up to f32 rounding). Fast path: the same kernels on both sides.
    EXPECT_LE(d, 1e-4f) << what << (fast ? " fast" : " reference");
  }
}

const auto kNoEdit = [](auto&&...) {};

// Mixtral: llama with experts, top-k renormalised.
TEST(MoeEquivalence, MixtralEqualsLlama) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto base = Model::load(testing::testdata(kModel));
  ASSERT_TRUE(base.is_ok());
  const GgufFile& g = (*base)->gguf();
  const MoeParts parts = expertise(g, "llama", 4, 2, 1.0f);
  auto moe = rewrite(g, "llama", kNoEdit, {}, parts.tensors, is_ffn, parts.keys);
  ASSERT_NE(moe, nullptr);
  EXPECT_EQ(moe->config().n_expert, 4);
  expect_same_logits(**base, *moe, "mixtral");
}

// qwen3moe: qwen3 attention, top-k renormalised.
TEST(MoeEquivalence, Qwen3MoeEqualsQwen3) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto base = Model::load(testing::testdata(kModel));
  ASSERT_TRUE(base.is_ok());
  const GgufFile& g = (*base)->gguf();
  const auto norms = qk_norms((*base)->config(), false);
  auto dense = rewrite(g, "qwen3", kNoEdit, norms);
  const MoeParts parts = expertise(g, "qwen3moe", 8, 2, 1.0f);
  auto moe = rewrite(g, "qwen3moe", kNoEdit, norms, parts.tensors, is_ffn, parts.keys);
  ASSERT_NE(dense, nullptr);
  ASSERT_NE(moe, nullptr);
  expect_same_logits(*dense, *moe, "qwen3moe");
}

// qwen2moe: weights not renormalised (so every expert is used: k = n), and
// a shared expert equal to the dense FFN under a gate vector of 0, which
// sigmoid makes 1/2: routed experts with half the down projection plus
// half the shared expert sum to the dense FFN.
TEST(MoeEquivalence, Qwen2MoeWithSharedExpertEqualsQwen2) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto base = Model::load(testing::testdata(kModel));
  ASSERT_TRUE(base.is_ok());
  const GgufFile& g = (*base)->gguf();
  const ModelConfig& c = (*base)->config();
  const auto biases = testing::qkv_biases(c);
  auto dense = rewrite(g, "qwen2", kNoEdit, biases);
  MoeParts parts = expertise(g, "qwen2moe", 4, 4, 0.5f);
  for (const GgufTensorInfo& t : g.tensors()) {
    if (!is_ffn(t.name)) continue;
    std::vector<float> v(t.elems);
    std::memcpy(v.data(), t.data, t.bytes);
    std::string name = t.name;
    name.replace(name.find(".weight"), 7, "_shexp.weight");
    parts.tensors.push_back({name, t.dims, std::move(v)});
  }
  auto vectors = biases;
  for (int l = 0; l < c.n_layer; ++l) {
    vectors.push_back({"blk." + std::to_string(l) + ".ffn_gate_inp_shexp.weight",
                       std::vector<float>(static_cast<size_t>(c.n_embd), 0.0f)});
  }
  parts.keys.push_back({"qwen2moe.expert_shared_feed_forward_length", GgufValue::make_uint32(static_cast<uint32_t>(c.n_ff))});
  auto moe = rewrite(g, "qwen2moe", kNoEdit, vectors, parts.tensors, is_ffn, parts.keys);
  ASSERT_NE(dense, nullptr);
  ASSERT_NE(moe, nullptr);
  expect_same_logits(*dense, *moe, "qwen2moe");
}

// olmoe has no dense sibling in ork: four identical experts (all used,
// weights not renormalised, summing to 1) must equal one expert. And its
// QK-norm is over the whole projection: scaling all of Wq changes nothing,
// scaling one head's rows does (a per-head norm would hide that).
TEST(MoeEquivalence, OlmoeExpertsAndWholeQkNorm) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto base = Model::load(testing::testdata(kModel));
  ASSERT_TRUE(base.is_ok());
  const GgufFile& g = (*base)->gguf();
  const ModelConfig& c = (*base)->config();
  const auto norms = qk_norms(c, true);
  const MoeParts one = expertise(g, "olmoe", 1, 1, 1.0f);
  const MoeParts four = expertise(g, "olmoe", 4, 4, 1.0f);
  auto m1 = rewrite(g, "olmoe", kNoEdit, norms, one.tensors, is_ffn, one.keys);
  auto m4 = rewrite(g, "olmoe", kNoEdit, norms, four.tensors, is_ffn, four.keys);
  ASSERT_NE(m1, nullptr);
  ASSERT_NE(m4, nullptr);
  expect_same_logits(*m1, *m4, "olmoe");
  const size_t hd = static_cast<size_t>(c.head_dim);
  auto scale_q = [&](size_t first_row, size_t last_row) {
    return [=](const std::string& name, std::vector<float>& data, const GgufTensorInfo& t) {
      if (name.find("attn_q.weight") == std::string::npos) return;
      for (size_t r = first_row; r < std::min<size_t>(last_row, t.dims[1]); ++r) {
        for (size_t k = 0; k < t.dims[0]; ++k) data[r * t.dims[0] + k] *= 3.0f;
      }
    };
  };
  auto all_q = rewrite(g, "olmoe", scale_q(0, 1 << 30), norms, four.tensors, is_ffn, four.keys);
  auto head1 = rewrite(g, "olmoe", scale_q(hd, 2 * hd), norms, four.tensors, is_ffn, four.keys);
  ASSERT_NE(all_q, nullptr);
  ASSERT_NE(head1, nullptr);
  EXPECT_LE(max_abs_diff(logits(*m4), logits(*all_q)), 1e-4f);
  EXPECT_GT(max_abs_diff(logits(*m4), logits(*head1)), 1e-2f);
}

// The stats count every token's k experts in every layer.
TEST(MoeStats, CountsRoutedPairsAndBytes) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto model = Model::load(testing::testdata("models/sotu-moe-f32.gguf"));
  ASSERT_TRUE(model.is_ok());
  Context ctx(**model, 32);
  const std::vector<int32_t> ids = {1, 111, 89, 352, 1194};
  ASSERT_TRUE(ctx.eval(ids).is_ok());
  const auto& s = ctx.moe_stats();
  EXPECT_EQ(s.tokens, 5u);
  ASSERT_EQ(s.hits.size(), 4u * 8u);
  for (int l = 0; l < 4; ++l) {
    uint64_t sum = 0;
    for (int e = 0; e < 8; ++e) sum += s.hits[static_cast<size_t>(l * 8 + e)];
    EXPECT_EQ(sum, 5u * 2u) << "layer " << l;
  }
  // Each active expert: gate + up + down, 3 x 256 x 256 f32.
  EXPECT_EQ(s.expert_bytes % (3ull * 256 * 256 * 4), 0u);
  EXPECT_GT(s.expert_bytes, 0u);
}

// The trained MoE packed with every matrix at i4, loaded.
Result<std::unique_ptr<Model>> sotu_moe_i4(const std::string& file) {
  PackOptions o;
  o.input = testing::testdata("models/sotu-moe-f32.gguf");
  o.output = ::testing::TempDir() + "/" + file;
  o.rules = {*parse_tier_rule(".=i4")};
  ORK_RETURN_IF_ERROR(pack_model(o).status());
  return Model::load(o.output);
}

// Decode runs the routed experts as two parallel loops (gate and up of all
// of them, then down); a batch runs them expert by expert. Same kernels,
// same rows: a token decoded alone gets the logits it gets inside a batch,
// bit for bit, and the stats count the same.
TEST(MoeDecode, FusedExpertsMatchTheBatchedPathExactly) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto model = sotu_moe_i4("sotu-moe-i4.orkpack");
  ASSERT_TRUE(model.is_ok());
  const std::vector<int32_t> ids = {1, 111, 89, 352, 1194, 40, 7, 300};
  Context batch(**model, 32);
  auto all = batch.eval(ids, /*all_logits=*/true);
  ASSERT_TRUE(all.is_ok());
  Context one(**model, 32);
  // Decode's loops hand follow-up work (each expert's down input, the
  // running sum of the outputs, RoPE and the KV store) to whichever thread
  // finishes a matrix: three threads on this machine's cores interleave
  // them in more ways than two.
  ThreadPool three(3);
  Context shared(**model, 32, &three);
  const size_t vocab = all->size() / ids.size();
  for (size_t t = 0; t < ids.size(); ++t) {
    auto l = one.eval(std::span<const int32_t>(&ids[t], 1));
    ASSERT_TRUE(l.is_ok());
    EXPECT_TRUE(std::equal(l->begin(), l->end(), all->begin() + static_cast<std::ptrdiff_t>(t * vocab))) << "token " << t;
    auto l3 = shared.eval(std::span<const int32_t>(&ids[t], 1));
    ASSERT_TRUE(l3.is_ok());
    EXPECT_EQ(*l3, *l) << "token " << t << " on three threads";
  }
  EXPECT_EQ(one.moe_stats().hits, batch.moe_stats().hits);
  EXPECT_EQ(one.moe_stats().fused_layers, ids.size() * 4);  // every layer of every decoded token
  EXPECT_EQ(batch.moe_stats().fused_layers, 0u);
  EXPECT_EQ(batch.moe_stats().fused_prefill_layers, 4u);
}

// An observer (how importance matrices are collected) sees every matmul,
// the routed experts' too, when a single token is evaluated: decode's fused
// expert loops stand aside for it, as the batched ones do.
TEST(MoeDecode, AnObserverSeesEveryRoutedExpert) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto model = sotu_moe_i4("sotu-moe-observed.orkpack");
  ASSERT_TRUE(model.is_ok());
  const ModelConfig& c = (*model)->config();
  Context ctx(**model, 32);
  int experts_seen = 0;
  ctx.set_observer([&](const WeightView& w, const float*, int) {
    for (int l = 0; l < c.n_layer; ++l) {
      const LayerWeights& L = (*model)->layer(l);
      for (const auto* set : {&L.gate_exps, &L.up_exps, &L.down_exps}) {
        for (const WeightView& e : *set) experts_seen += &e == &w;
      }
    }
  });
  const int32_t id = 111;
  ASSERT_TRUE(ctx.eval(std::span<const int32_t>(&id, 1)).is_ok());
  EXPECT_EQ(experts_seen, c.n_layer * c.n_expert_used * 3);
  EXPECT_EQ(ctx.moe_stats().fused_layers, 0u);
}

// The decode profile: every byte a token reads lands in one phase (the
// dense weights, the routed experts, the KV cache, exactly), time in loops
// is part of each phase's time, and profiling changes no logit.
TEST(Profile, AccountsForEveryByteAndChangesNothing) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto model = sotu_moe_i4("sotu-moe-profile.orkpack");
  ASSERT_TRUE(model.is_ok());
  const ModelConfig& c = (*model)->config();
  const std::vector<int32_t> prompt = {1, 111, 89}, ids = {352, 1194, 40, 7, 300};
  Context plain(**model, 32), profiled(**model, 32);
  ASSERT_TRUE(plain.eval(prompt).is_ok());
  ASSERT_TRUE(profiled.eval(prompt).is_ok());
  Context::Profile profile;
  profiled.set_profile(&profile);
  const uint64_t experts0 = profiled.moe_stats().expert_bytes;
  for (int32_t id : ids) {
    auto want = plain.eval(std::span<const int32_t>(&id, 1));
    auto got = profiled.eval(std::span<const int32_t>(&id, 1));
    ASSERT_TRUE(want.is_ok() && got.is_ok());
    EXPECT_EQ(*got, *want);
  }
  profiled.set_profile(nullptr);
  EXPECT_EQ(profile.tokens, ids.size());
  // Positions 3..7 each read K and V of every position up to their own.
  uint64_t kv = 0;
  for (size_t t = 0; t < ids.size(); ++t) kv += (prompt.size() + t + 1) * 2 * static_cast<uint64_t>(c.kv_dim()) * 2 * c.n_layer;
  uint64_t bytes = 0;
  for (const Context::Profile::Entry& e : profile.phases) {
    bytes += e.bytes;
    EXPECT_GE(e.seconds, 0.0);
    EXPECT_LE(e.loop_seconds, e.seconds + 1e-9);
  }
  EXPECT_EQ(bytes, ids.size() * (*model)->dense_bytes_per_token() + (profiled.moe_stats().expert_bytes - experts0) + kv);
  EXPECT_EQ(profile.phases[Context::Profile::kAttention].bytes, kv);
  EXPECT_GT(profile.phases[Context::Profile::kExpertsGateUp].bytes, 0u);
  EXPECT_GT(profile.phases[Context::Profile::kExpertsDown].bytes, 0u);
  EXPECT_EQ(profile.phases[Context::Profile::kFfnGateUp].bytes, 0u);  // no dense FFN in an MoE
  EXPECT_GT(profile.phases[Context::Profile::kRouter].seconds, 0.0);
}

// The trained MoE written to `file` with `edit` applied to each F32
// tensor's values.
std::string sotu_moe_edited(const std::string& file, const std::function<void(const GgufTensorInfo&, float*)>& edit) {
  const std::string path = ::testing::TempDir() + "/" + file;
  auto src = GgufFile::open(testing::testdata("models/sotu-moe-f32.gguf"));
  EXPECT_TRUE(src.is_ok());
  GgufWriter w;
  for (const auto& [key, value] : src->metadata()) w.set(key, value);
  for (const GgufTensorInfo& t : src->tensors()) {
    std::vector<uint8_t> bytes(t.data, t.data + t.bytes);
    if (t.type == GgmlType::kF32) edit(t, reinterpret_cast<float*>(bytes.data()));
    EXPECT_TRUE(w.add_tensor(t.name, t.type, t.dims, std::move(bytes)).is_ok());
  }
  EXPECT_TRUE(w.write_file(path).is_ok());
  return path;
}

// The trained MoE with its routers' values rounded to bf16, as they are in
// a checkpoint trained in bf16 and converted by llama.cpp (routers F32).
std::string moe_with_bf16_routers() {
  return sotu_moe_edited("sotu-moe-bf16-routers.gguf", [](const GgufTensorInfo& t, float* f) {
    if (t.name.find("ffn_gate_inp") == std::string::npos) return;
    for (uint64_t i = 0; i < t.elems; ++i) f[i] = bf16_to_f32(f32_to_bf16(f[i]));
  });
}

Tier packed_tier(const std::string& pack, const std::string& tensor) {
  auto f = OrkpackFile::open(pack);
  EXPECT_TRUE(f.is_ok());
  const OrkpackTensor* t = f->find_tensor(tensor);
  EXPECT_NE(t, nullptr) << tensor << " not in " << pack;
  return t != nullptr ? t->spec.tier : Tier::kF32;
}

// Routers are packed whatever the rules say: in bf16 when every value is a
// bf16 (then the model's logits are the f32 router's, bit for bit), else
// in f32 - a trained f32 router is never rounded.
TEST(MoePack, RoutersKeepTheirValuesInBf16WhenTheyAreBf16) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  PackOptions o;
  o.input = testing::testdata("models/sotu-moe-f32.gguf");
  o.output = ::testing::TempDir() + "/sotu-moe-f32-routers.orkpack";
  o.rules = {*parse_tier_rule(".=f32")};
  ASSERT_TRUE(pack_model(o).is_ok());
  EXPECT_EQ(packed_tier(o.output, "blk.0.ffn_gate_inp.weight"), Tier::kF32);
  o.rules = {*parse_tier_rule(".=i4")};
  ASSERT_TRUE(pack_model(o).is_ok());
  EXPECT_EQ(packed_tier(o.output, "blk.0.ffn_gate_inp.weight"), Tier::kF32);

  o.input = moe_with_bf16_routers();
  o.output = ::testing::TempDir() + "/sotu-moe-bf16-routers.orkpack";
  o.rules = {*parse_tier_rule(".=f32")};
  ASSERT_TRUE(pack_model(o).is_ok());
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(packed_tier(o.output, "blk." + std::to_string(l) + ".ffn_gate_inp.weight"), Tier::kBf16) << l;
  }
  auto gguf = Model::load(o.input);
  auto pack = Model::load(o.output);
  ASSERT_TRUE(gguf.is_ok() && pack.is_ok());
  const std::vector<int32_t> ids = {1, 111, 89, 352, 1194, 40, 7, 300};
  Context from_gguf(**gguf, 32), from_pack(**pack, 32);
  for (size_t t = 0; t < ids.size(); ++t) {
    auto want = from_gguf.eval(std::span<const int32_t>(&ids[t], 1));
    auto got = from_pack.eval(std::span<const int32_t>(&ids[t], 1));
    ASSERT_TRUE(want.is_ok() && got.is_ok());
    EXPECT_EQ(*got, *want) << "token " << t;
  }
  EXPECT_EQ(from_pack.moe_stats().hits, from_gguf.moe_stats().hits);
}

// The trained MoE with outliers in the gate experts' first columns, so
// that the packer rotates gate (spreading them) but not up: experts whose
// gate and up are stored in different bases.
std::string moe_with_gate_outliers() {
  return sotu_moe_edited("sotu-moe-gate-outliers.gguf", [](const GgufTensorInfo& t, float* f) {
    if (t.name.find("ffn_gate_exps") == std::string::npos) return;
    for (uint64_t r = 0; r < t.elems / t.dims[0]; ++r) f[r * t.dims[0]] *= 40.0f;
  });
}

// The logits of a 40-token batch on the fused prefill (1 and 3 threads)
// against the one-expert-at-a-time loop, bit for bit.
void expect_fused_prefill_matches_loop(const Model& model) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(1 + (i * 37) % 500);
  Context loop(model, 64);
  loop.set_observer([](const WeightView&, const float*, int) {});
  auto want = loop.eval(ids, /*all_logits=*/true);
  ASSERT_TRUE(want.is_ok());
  EXPECT_EQ(loop.moe_stats().fused_prefill_layers, 0u);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    Context fused(model, 64, &pool);
    auto got = fused.eval(ids, /*all_logits=*/true);
    ASSERT_TRUE(got.is_ok());
    EXPECT_EQ(fused.moe_stats().fused_prefill_layers, 4u);
    EXPECT_EQ(fused.moe_stats().hits, loop.moe_stats().hits);
    EXPECT_EQ(fused.moe_stats().expert_bytes, loop.moe_stats().expert_bytes);
    EXPECT_TRUE(*got == *want) << threads << " threads";
  }
}

// A batch with the experts split over the threads (each thread whole
// experts) gives the logits of the one-expert-at-a-time loop (each expert's
// rows split over the threads; an observer keeps a Context on it), bit for
// bit, on one thread and on three: with mixed tiers, and with gate and up
// in different bases.
TEST(MoePrefill, ExpertsSplitOverThreadsMatchTheLoopExactly) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  PackOptions mixed;
  mixed.input = testing::testdata("models/sotu-moe-f32.gguf");
  mixed.output = ::testing::TempDir() + "/sotu-moe-mixed.orkpack";
  mixed.rules = {*parse_tier_rule(".=i4"), *parse_tier_rule("ffn_up_exps=i8"), *parse_tier_rule("ffn_down_exps=i5")};
  PackOptions bases;
  bases.input = moe_with_gate_outliers();
  bases.output = ::testing::TempDir() + "/sotu-moe-bases.orkpack";
  bases.rules = {*parse_tier_rule(".=i4")};
  for (const PackOptions& o : {mixed, bases}) {
    SCOPED_TRACE(o.output);
    ASSERT_TRUE(pack_model(o).is_ok());
    auto model = Model::load(o.output);
    ASSERT_TRUE(model.is_ok());
    if (&o == &bases) {
      int differ = 0;
      const LayerWeights& l = (*model)->layer(0);
      for (size_t e = 0; e < l.gate_exps.size(); ++e) differ += l.gate_exps[e].rotation_block != l.up_exps[e].rotation_block;
      EXPECT_GT(differ, 0) << "no expert has gate and up in different bases";
    }
    expect_fused_prefill_matches_loop(**model);
  }
}

}  // namespace
}  // namespace ork
