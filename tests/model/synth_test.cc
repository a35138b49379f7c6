#include "model/synth.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <cmath>
#include <functional>
#include <map>

#include "model/forward.h"
#include "model/tokenizer/tokenizer.h"
#include "testdata.h"

namespace ork {
namespace {

Result<std::unique_ptr<Model>> load_synth(const SynthOptions& o) {
  ORK_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, synth_write_memory(o));
  ORK_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::parse(MappedFile::from_bytes(std::move(bytes), "synth.gguf")));
  return Model::load(std::move(gguf));
}

class SynthArch : public ::testing::TestWithParam<std::tuple<const char*, GgmlType>> {
 protected:
  // A two-layer tiny model of the parameter's architecture and type
  // ("mixtral": llama with experts), four experts with two used.
  SynthOptions options() const {
    SynthOptions o;
    synth_preset("tiny", &o);
    o.arch = std::get<0>(GetParam());
    o.type = std::get<1>(GetParam());
    o.n_layer = 2;
    const bool moe = o.arch.find("moe") != std::string::npos || o.arch == "mixtral";
    if (o.arch == "mixtral") o.arch = "llama";
    if (moe) {
      o.n_expert = 4;
      o.n_expert_used = 2;
      // The Qwen MoEs name their experts' width; mixtral's and olmoe's are n_ff.
      o.n_ff_exp = o.arch == "qwen2moe" || o.arch == "qwen3moe" ? 128 : 0;
      o.n_ff_shexp = 256;
    }
    if (o.arch == "olmoe") o.n_head_kv = o.n_head;  // OLMoE is multi-head
    if (o.arch == "qwen35" || o.arch == "qwen35moe") {
      o.n_layer = 4;  // three gated DeltaNets, then gated attention
      o.n_ff_exp = 128;
    }
    if (o.arch == "lfm2" || o.arch == "lfm2moe") {
      o.n_layer = 3;  // short convolution, short convolution, attention
      o.n_ff_exp = 128;
      o.n_dense_leading = o.arch == "lfm2moe" ? 1 : 0;
    }
    return o;
  }
};

TEST_P(SynthArch, LoadsTokenizesAndRuns) {
  const SynthOptions o = options();
  const bool moe = o.n_expert > 0;
  auto model = load_synth(o);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  EXPECT_STREQ((*model)->config().arch->name, o.arch.c_str());
  EXPECT_EQ((*model)->config().n_expert, moe ? 4 : 0);
  EXPECT_EQ((*model)->layer(0).bq.empty(), o.arch != "qwen2" && o.arch != "qwen2moe");
  EXPECT_EQ((*model)->layer(0).q_norm.empty(), o.arch != "qwen3" && o.arch != "qwen3moe" && o.arch != "olmoe");
  EXPECT_EQ((*model)->layer(o.n_layer - 1).gate_exps.size(), moe ? 4u : 0u);
  EXPECT_EQ((*model)->layer(0).shexp_gate.empty(), o.arch != "qwen2moe" && o.arch != "qwen35moe");
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const std::string text = "Once upon a time, \xC3\xA9t\xC3\xA9!";
  const auto ids = (*tok)->encode(text, true);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ((*tok)->decode(ids), text);
  Context ctx(**model, 64);
  auto logits = ctx.eval(ids);
  ASSERT_TRUE(logits.is_ok()) << logits.status().to_string();
  for (float v : *logits) ASSERT_TRUE(std::isfinite(v));
}

INSTANTIATE_TEST_SUITE_P(All, SynthArch,
                         ::testing::Combine(::testing::Values("llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe",
                                                              "olmoe", "mixtral", "lfm2", "lfm2moe", "qwen35",
                                                              "qwen35moe"),
                                            ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0,
                                                              GgmlType::kQ4_0)),
                         [](const auto& param_info) {
                           return std::string(std::get<0>(param_info.param)) + "_" +
                                  std::string(ggml_type_name(std::get<1>(param_info.param)));
                         });

// The tensors llama.cpp's loader asks for, family by family (its
// src/models/<arch>.cpp: names, shapes, which are optional), worked out here
// from the file's metadata the way llama.cpp reads it, then matched against
// what synth wrote: every required tensor with its exact shape, and nothing
// else (llama.cpp refuses a file with tensors it did not ask for).
struct LlamaCppLayout {
  std::map<std::string, std::vector<uint64_t>> required;
  std::map<std::string, std::vector<uint64_t>> optional;
};

// llama.cpp's lfm2 / lfm2moe (src/llama-model.cpp): KV heads per layer,
// 0 marking a short convolution; the final norm token_embd_norm; the
// output tied unless present; lfm2moe's experts after
// leading_dense_block_count dense FFNs, each with its selection bias.
LlamaCppLayout lfm2_layout(const GgufFile& g, uint64_t E, uint64_t H, uint64_t F, uint64_t X, uint64_t V) {
  const std::string a = *g.find_string("general.architecture");
  const uint64_t hd = E / H;
  const auto L = static_cast<uint64_t>(g.find_int(a + ".shortconv.l_cache").value_or(0));
  const auto dense = static_cast<uint64_t>(g.find_int(a + ".leading_dense_block_count").value_or(0));
  const auto FX = static_cast<uint64_t>(g.find_int(a + ".expert_feed_forward_length").value_or(0));
  const std::vector<int64_t>& kv = g.find(a + ".attention.head_count_kv")->ints;
  LlamaCppLayout l;
  l.required["token_embd.weight"] = {E, V};
  l.required["token_embd_norm.weight"] = {E};
  l.optional["output.weight"] = {E, V};
  for (uint64_t i = 0; i < kv.size(); ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    l.required[p + "attn_norm.weight"] = {E};
    l.required[p + "ffn_norm.weight"] = {E};
    if (kv[i] == 0) {
      l.required[p + "shortconv.conv.weight"] = {L, E};
      l.required[p + "shortconv.in_proj.weight"] = {E, 3 * E};
      l.required[p + "shortconv.out_proj.weight"] = {E, E};
    } else {
      const auto KV = static_cast<uint64_t>(kv[i]);
      l.required[p + "attn_q.weight"] = {E, E};
      l.required[p + "attn_k.weight"] = {E, hd * KV};
      l.required[p + "attn_v.weight"] = {E, hd * KV};
      l.required[p + "attn_output.weight"] = {E, E};
      l.required[p + "attn_q_norm.weight"] = {hd};
      l.required[p + "attn_k_norm.weight"] = {hd};
    }
    if (a == "lfm2" || i < dense) {
      l.required[p + "ffn_gate.weight"] = {E, F};
      l.required[p + "ffn_up.weight"] = {E, F};
      l.required[p + "ffn_down.weight"] = {F, E};
    } else {
      l.required[p + "ffn_gate_inp.weight"] = {E, X};
      l.required[p + "ffn_gate_exps.weight"] = {E, FX, X};
      l.required[p + "ffn_up_exps.weight"] = {E, FX, X};
      l.required[p + "ffn_down_exps.weight"] = {FX, E, X};
      l.required[p + "exp_probs_b.bias"] = {X};
    }
  }
  return l;
}

// ik_llama.cpp's qwen35 / qwen35moe (the hybrid fixtures' engine; their
// MODEL.md lists its tensors): every full_attention_interval-th layer gated
// attention (attn_q twice q_dim: query and gate), the others gated
// DeltaNets; post_attention_norm before the FFN; qwen35moe's FFNs all
// experts plus a gated shared expert.
LlamaCppLayout qwen35_layout(const GgufFile& g, uint64_t E, uint64_t H, uint64_t KV, uint64_t hd, uint64_t F, uint64_t X,
                             uint64_t V) {
  const std::string a = *g.find_string("general.architecture");
  auto key = [&](const std::string& k) { return static_cast<uint64_t>(g.find_int(a + "." + k).value_or(0)); };
  const uint64_t interval = key("full_attention_interval"), K = key("ssm.conv_kernel");
  const uint64_t dk = key("ssm.state_size"), nk = key("ssm.group_count"), nv = key("ssm.time_step_rank");
  const uint64_t inner = key("ssm.inner_size"), qkv = 2 * nk * dk + inner;
  const uint64_t FX = key("expert_feed_forward_length"), FS = key("expert_shared_feed_forward_length");
  LlamaCppLayout l;
  l.required["token_embd.weight"] = {E, V};
  l.required["output_norm.weight"] = {E};
  l.optional["output.weight"] = {E, V};
  for (uint64_t i = 0; i < key("block_count"); ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    l.required[p + "attn_norm.weight"] = {E};
    l.required[p + "post_attention_norm.weight"] = {E};
    if ((i + 1) % interval == 0) {
      l.required[p + "attn_q.weight"] = {E, 2 * H * hd};
      l.required[p + "attn_k.weight"] = {E, KV * hd};
      l.required[p + "attn_v.weight"] = {E, KV * hd};
      l.required[p + "attn_q_norm.weight"] = {hd};
      l.required[p + "attn_k_norm.weight"] = {hd};
      l.required[p + "attn_output.weight"] = {H * hd, E};
    } else {
      l.required[p + "attn_qkv.weight"] = {E, qkv};
      l.required[p + "attn_gate.weight"] = {E, inner};
      l.required[p + "ssm_beta.weight"] = {E, nv};
      l.required[p + "ssm_alpha.weight"] = {E, nv};
      l.required[p + "ssm_conv1d.weight"] = {K, qkv};
      l.required[p + "ssm_dt.bias"] = {nv};
      l.required[p + "ssm_a"] = {nv};
      l.required[p + "ssm_norm.weight"] = {inner / nv};
      l.required[p + "ssm_out.weight"] = {inner, E};
    }
    if (a == "qwen35") {
      l.required[p + "ffn_gate.weight"] = {E, F};
      l.required[p + "ffn_up.weight"] = {E, F};
      l.required[p + "ffn_down.weight"] = {F, E};
      continue;
    }
    l.required[p + "ffn_gate_inp.weight"] = {E, X};
    l.required[p + "ffn_gate_exps.weight"] = {E, FX, X};
    l.required[p + "ffn_up_exps.weight"] = {E, FX, X};
    l.required[p + "ffn_down_exps.weight"] = {FX, E, X};
    l.required[p + "ffn_gate_inp_shexp.weight"] = {E};
    l.required[p + "ffn_gate_shexp.weight"] = {E, FS};
    l.required[p + "ffn_up_shexp.weight"] = {E, FS};
    l.required[p + "ffn_down_shexp.weight"] = {FS, E};
  }
  return l;
}

LlamaCppLayout llama_cpp_layout(const GgufFile& g) {
  const std::string a = *g.find_string("general.architecture");
  auto key = [&](const std::string& k) { return static_cast<uint64_t>(g.find_int(a + "." + k).value_or(0)); };
  const uint64_t E = key("embedding_length"), H = key("attention.head_count"), KV = key("attention.head_count_kv");
  const uint64_t hd = key("attention.key_length") > 0 ? key("attention.key_length") : E / H;
  const uint64_t F = key("feed_forward_length"), X = key("expert_count"), used = key("expert_used_count");
  const uint64_t V = g.find("tokenizer.ggml.tokens")->array_size();
  const bool qwen_moe = a == "qwen2moe" || a == "qwen3moe";
  // Expert width: the Qwen MoEs' own key, else n_ff / n_expert_used; n_ff for mixtral and olmoe.
  const uint64_t FX = qwen_moe ? (key("expert_feed_forward_length") > 0 ? key("expert_feed_forward_length") : F / used) : F;
  LlamaCppLayout l;
  l.required["token_embd.weight"] = {E, V};
  if (a == "lfm2" || a == "lfm2moe") return lfm2_layout(g, E, H, F, X, V);
  if (a == "qwen35" || a == "qwen35moe") return qwen35_layout(g, E, H, KV, hd, F, X, V);
  l.required["output_norm.weight"] = {E};
  (a == "qwen2moe" || a == "olmoe" ? l.required : l.optional)["output.weight"] = {E, V};
  for (uint64_t i = 0; i < key("block_count"); ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    // qwen2moe and olmoe read the attention as n_embd wide.
    const uint64_t Q = a == "qwen2moe" || a == "olmoe" ? E : hd * H;
    l.required[p + "attn_norm.weight"] = {E};
    l.required[p + "attn_q.weight"] = {E, Q};
    l.required[p + "attn_k.weight"] = {E, hd * KV};
    l.required[p + "attn_v.weight"] = {E, hd * KV};
    l.required[p + "attn_output.weight"] = {Q, E};
    l.required[p + "ffn_norm.weight"] = {E};
    if (a == "qwen2" || a == "qwen2moe") {
      l.required[p + "attn_q.bias"] = {Q};
      l.required[p + "attn_k.bias"] = {hd * KV};
      l.required[p + "attn_v.bias"] = {hd * KV};
    }
    if (a == "qwen3" || a == "qwen3moe") {
      l.required[p + "attn_q_norm.weight"] = {hd};
      l.required[p + "attn_k_norm.weight"] = {hd};
    }
    if (a == "olmoe") {
      l.required[p + "attn_q_norm.weight"] = {E};
      l.required[p + "attn_k_norm.weight"] = {E};
    }
    if (X == 0) {
      l.required[p + "ffn_gate.weight"] = {E, F};
      l.required[p + "ffn_up.weight"] = {E, F};
      l.required[p + "ffn_down.weight"] = {F, E};
      continue;
    }
    l.required[p + "ffn_gate_inp.weight"] = {E, X};
    (a == "llama" ? l.optional : l.required)[p + "ffn_gate_exps.weight"] = {E, FX, X};
    l.required[p + "ffn_up_exps.weight"] = {E, FX, X};
    l.required[p + "ffn_down_exps.weight"] = {FX, E, X};
    if (a == "qwen2moe") {
      const uint64_t FS = key("expert_shared_feed_forward_length") > 0 ? key("expert_shared_feed_forward_length") : F;
      l.required[p + "ffn_gate_inp_shexp.weight"] = {E};
      l.required[p + "ffn_gate_shexp.weight"] = {E, FS};
      l.required[p + "ffn_up_shexp.weight"] = {E, FS};
      l.required[p + "ffn_down_shexp.weight"] = {FS, E};
    }
  }
  return l;
}

TEST_P(SynthArch, HasTheTensorsLlamaCppLoads) {
  const SynthOptions o = options();
  auto bytes = synth_write_memory(o);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto g = GgufFile::parse(MappedFile::from_bytes(std::move(*bytes), "synth.gguf"));
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  for (const char* k : {"context_length", "embedding_length", "block_count", "feed_forward_length",
                        "attention.head_count", "attention.layer_norm_rms_epsilon"}) {
    EXPECT_NE(g->find(o.arch + "." + k), nullptr) << k;
  }
  EXPECT_EQ(g->find_string("tokenizer.ggml.model"), "llama");
  const LlamaCppLayout want = llama_cpp_layout(*g);
  size_t found = 0;
  for (const auto& [name, dims] : want.required) {
    const GgufTensorInfo* t = g->find_tensor(name);
    ASSERT_NE(t, nullptr) << name << " is missing";
    EXPECT_EQ(t->dims, dims) << name;
    ++found;
  }
  for (const auto& [name, dims] : want.optional) {
    const GgufTensorInfo* t = g->find_tensor(name);
    if (t == nullptr) continue;
    EXPECT_EQ(t->dims, dims) << name;
    ++found;
  }
  EXPECT_EQ(g->tensors().size(), found) << "tensors llama.cpp would not ask for";
  // And ork reads the experts as llama.cpp does.
  auto model = Model::load(std::move(*g));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  if (o.n_expert > 0) {
    const auto& exps = want.required.at("blk." + std::to_string(o.n_layer - 1) + ".ffn_up_exps.weight");
    EXPECT_EQ(static_cast<uint64_t>((*model)->config().n_ff_exp), exps[1]);
  }
}

// Expert widths are read as llama.cpp reads them: a Qwen MoE without
// expert_feed_forward_length splits feed_forward_length over the experts
// used; olmoe ignores the key (its experts are feed_forward_length wide).
TEST(SynthArchKeys, ExpertWidthFollowsLlamaCpp) {
  auto load_edited = [](SynthOptions o, const std::function<void(GgufWriter&)>& edit) -> Result<std::unique_ptr<Model>> {
    GgufWriter w;
    GgufWriter::DataFn fn;
    ORK_RETURN_IF_ERROR(synth_model(o, &w, &fn));
    edit(w);
    ORK_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, w.write_memory(fn));
    ORK_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::parse(MappedFile::from_bytes(std::move(bytes), "edited.gguf")));
    return Model::load(std::move(gguf));
  };
  SynthOptions q;
  q.arch = "qwen3moe", q.n_ff = 256, q.n_expert = 4, q.n_expert_used = 2, q.n_ff_exp = 128;
  auto qwen = load_edited(q, [](GgufWriter& w) { w.erase("qwen3moe.expert_feed_forward_length"); });
  ASSERT_TRUE(qwen.is_ok()) << qwen.status().to_string();
  EXPECT_EQ((*qwen)->config().n_ff_exp, 128);  // 256 / 2
  SynthOptions o;
  o.arch = "olmoe", o.n_head_kv = o.n_head, o.n_expert = 4, o.n_expert_used = 2;
  auto olmoe = load_edited(o, [](GgufWriter& w) { w.set("olmoe.expert_feed_forward_length", GgufValue::make_uint32(64)); });
  ASSERT_TRUE(olmoe.is_ok()) << olmoe.status().to_string();
  EXPECT_EQ((*olmoe)->config().n_ff_exp, o.n_ff);
}

// What llama.cpp could not load is refused with the reason.
TEST(Synth, RefusesShapesLlamaCppCannotLoad) {
  auto refusal = [](SynthOptions o) {
    GgufWriter w;
    GgufWriter::DataFn fn;
    return synth_model(o, &w, &fn).message();
  };
  SynthOptions o;
  o.arch = "olmoe", o.n_expert = 4, o.n_expert_used = 2, o.n_head = 4, o.n_head_kv = 4;
  EXPECT_EQ(refusal(o), "");
  o.n_head_kv = 2;
  EXPECT_NE(refusal(o).find("KV heads"), std::string::npos) << refusal(o);
  o.n_head_kv = 4, o.n_ff_exp = 128;
  EXPECT_NE(refusal(o).find("--n-ff 128"), std::string::npos) << refusal(o);
  o.arch = "qwen2moe", o.n_ff_exp = 0, o.head_dim = 32;  // 4 x 32 != 256
  EXPECT_NE(refusal(o).find("n_head x head_dim"), std::string::npos) << refusal(o);
}

TEST(Synth, DeterministicForASeed) {
  SynthOptions o;
  synth_preset("tiny", &o);
  const auto a = synth_write_memory(o);
  const auto b = synth_write_memory(o);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(*a, *b);
  o.seed = 43;
  EXPECT_NE(*synth_write_memory(o), *a);
}

// FNV-1a, 64 bits.
uint64_t digest(const std::vector<uint8_t>& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

// The rows of a matrix are made on every thread of the machine; the files
// are the bytes the generator wrote row after row on one thread before
// that (the tiny preset's digests, taken from that version's `ork synth
// --preset tiny [--type Q4_0]`), so a benchmark file made by any version
// holds the same weights. Its matrices split (128 wide, 64 rows a slice at
// least, up to 512 rows; a row offset off by its draws fails it).
TEST(Synth, TheSameBytesAsRowAfterRowOnOneThread) {
  SynthOptions o;
  synth_preset("tiny", &o);
  const auto f32 = synth_write_memory(o);
  ASSERT_TRUE(f32.is_ok()) << f32.status().to_string();
  EXPECT_EQ(digest(*f32), 0x941448d598d11a83ull);
  o.type = GgmlType::kQ4_0;
  const auto q4 = synth_write_memory(o);
  ASSERT_TRUE(q4.is_ok()) << q4.status().to_string();
  EXPECT_EQ(digest(*q4), 0x670c1952953f3985ull);
}

// The MoE comparison shape: at 12 layers, 7.6B parameters (llama.cpp's
// figures in issue 5 are for this model).
TEST(Synth, Qwen3Moe30bPresetHasTheRightShape) {
  SynthOptions o;
  ASSERT_TRUE(synth_preset("qwen3moe-30b-a3b", &o));
  EXPECT_EQ(o.arch, "qwen3moe");
  EXPECT_EQ(o.n_expert, 128);
  EXPECT_EQ(o.n_expert_used, 8);
  EXPECT_EQ(o.n_ff_exp, 768);
  EXPECT_EQ(o.head_dim, 128);
  EXPECT_EQ(o.n_head_kv, 4);
  o.n_layer = 12;
  EXPECT_NEAR(static_cast<double>(synth_param_count(o)), 7.6e9, 0.05e9);
}

// The layouts above describe the hybrid fixtures the reference engines
// made (testdata/hybrid): each fixture holds exactly those tensors.
TEST(SynthArchKeys, HybridLayoutsDescribeTheReferenceFixtures) {
  for (const char* name : {"lfm2", "lfm2moe", "qwen35", "qwen35moe"}) {
    const std::string path = testing::testdata(std::string("hybrid/") + name + "-f32.gguf");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "test data missing: " << path;
    auto g = GgufFile::open(path);
    ASSERT_TRUE(g.is_ok());
    const LlamaCppLayout want = llama_cpp_layout(*g);
    size_t found = 0;
    for (const auto& [t, dims] : want.required) {
      const GgufTensorInfo* info = g->find_tensor(t);
      ASSERT_NE(info, nullptr) << name << ": " << t;
      EXPECT_EQ(info->dims, dims) << name << ": " << t;
      ++found;
    }
    for (const auto& [t, dims] : want.optional) found += g->find_tensor(t) != nullptr ? 1 : 0;
    EXPECT_EQ(g->tensors().size(), found) << name;
  }
}

TEST(Synth, Qwen36PresetHasTheRightShape) {
  SynthOptions o;
  ASSERT_TRUE(synth_preset("qwen3.6-35b-a3b", &o));
  EXPECT_EQ(o.arch, "qwen35moe");
  EXPECT_EQ(o.n_layer, 40);
  EXPECT_EQ(o.n_expert, 256);
  // About 35B parameters.
  EXPECT_NEAR(static_cast<double>(synth_param_count(o)), 35e9, 1.5e9);
  o.n_layer = 8;
  o.n_vocab = 512, o.n_embd = 256, o.n_head = 4, o.head_dim = 64, o.n_expert = 4, o.n_expert_used = 2;
  o.n_ff_exp = 64, o.n_ff_shexp = 64, o.ssm_k_heads = 2, o.ssm_v_heads = 4, o.ssm_k_dim = o.ssm_v_dim = 32;
  auto model = load_synth(o);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  EXPECT_EQ((*model)->config().n_kv_layers, 2);
  EXPECT_EQ((*model)->config().n_delta_layers, 6);
  EXPECT_EQ((*model)->config().n_rot, 16);
}

// LFM2-8B-A1B: 8.3B parameters (1.5B active), 6 attention layers of 24.
TEST(Synth, Lfm28bA1bPresetHasTheRightShape) {
  SynthOptions o;
  ASSERT_TRUE(synth_preset("lfm2-8b-a1b", &o));
  EXPECT_EQ(o.arch, "lfm2moe");
  EXPECT_EQ(o.n_layer, 24);
  EXPECT_EQ(o.attention_layers, (std::vector<int>{2, 6, 10, 14, 18, 21}));
  EXPECT_EQ(o.n_dense_leading, 2);
  EXPECT_EQ(o.n_expert, 32);
  EXPECT_EQ(o.n_expert_used, 4);
  EXPECT_EQ(o.n_ff_exp, 1792);
  EXPECT_NEAR(static_cast<double>(synth_param_count(o)), 8.3e9, 0.1e9);
  // --layers 12 keeps the attention layers below it (2, 6, 10).
  o.n_layer = 12;
  o.n_vocab = 512;
  o.n_embd = 256, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 256, o.n_ff_exp = 64, o.n_expert = 4, o.n_expert_used = 2;
  auto model = load_synth(o);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  EXPECT_EQ((*model)->config().n_kv_layers, 3);
  EXPECT_EQ((*model)->config().n_conv_layers, 9);
}

TEST(Synth, Llama1bPresetHasTheRightShape) {
  SynthOptions o;
  ASSERT_TRUE(synth_preset("llama-1b", &o));
  EXPECT_EQ(o.n_embd, 2048);
  EXPECT_EQ(o.n_layer, 16);
  EXPECT_EQ(o.n_head, 32);
  EXPECT_EQ(o.n_head_kv, 8);
  EXPECT_EQ(o.n_ff, 8192);
  EXPECT_FALSE(o.tied);
  // 1.1B parameters, as the llama.cpp comparison model.
  EXPECT_NEAR(static_cast<double>(synth_param_count(o)), 1.1e9, 0.05e9);
}

TEST(Synth, RejectsBadShapesClearly) {
  SynthOptions o;
  o.n_head = 3;
  o.n_head_kv = 2;
  GgufWriter writer;
  GgufWriter::DataFn data_fn;
  const Status s = synth_model(o, &writer, &data_fn);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("n_head"), std::string::npos) << s.message();
  o = SynthOptions{};
  o.arch = "gpt-j";
  GgufWriter w;
  GgufWriter::DataFn fn;
  EXPECT_NE(synth_model(o, &w, &fn).message().find("gpt-j"), std::string::npos);
}

TEST(Model, MissingTensorIsNamed) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::make_string("llama"));
  w.set("llama.embedding_length", GgufValue::make_uint32(32));
  w.set("llama.block_count", GgufValue::make_uint32(1));
  w.set("llama.feed_forward_length", GgufValue::make_uint32(64));
  w.set("llama.attention.head_count", GgufValue::make_uint32(4));
  ASSERT_TRUE(w.add_tensor("token_embd.weight", GgmlType::kF32, {32, 300}, std::vector<uint8_t>(32 * 300 * 4)).is_ok());
  auto gguf = GgufFile::parse(MappedFile::from_bytes(*w.write_memory(), "partial.gguf"));
  ASSERT_TRUE(gguf.is_ok());
  auto model = Model::load(std::move(gguf).value());
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.status().message().find("partial.gguf"), std::string::npos);
  EXPECT_NE(model.status().message().find("output_norm.weight"), std::string::npos) << model.status().message();
}

TEST(Model, UnsupportedArchitectureIsNamed) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::make_string("mamba"));
  auto gguf = GgufFile::parse(MappedFile::from_bytes(*w.write_memory(), "m.gguf"));
  auto model = Model::load(std::move(gguf).value());
  ASSERT_FALSE(model.is_ok());
  EXPECT_EQ(model.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(model.status().message().find("mamba"), std::string::npos);
}

}  // namespace
}  // namespace ork
