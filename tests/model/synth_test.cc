#include "model/synth.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/forward.h"
#include "model/tokenizer/tokenizer.h"

namespace ork {
namespace {

Result<std::unique_ptr<Model>> load_synth(const SynthOptions& o) {
  ORK_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, synth_write_memory(o));
  ORK_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::parse(MappedFile::from_bytes(std::move(bytes), "synth.gguf")));
  return Model::load(std::move(gguf));
}

class SynthArch : public ::testing::TestWithParam<std::tuple<const char*, GgmlType>> {};

TEST_P(SynthArch, LoadsTokenizesAndRuns) {
  SynthOptions o;
  synth_preset("tiny", &o);
  o.arch = std::get<0>(GetParam());
  o.type = std::get<1>(GetParam());
  o.n_layer = 2;
  const bool moe = o.arch.find("moe") != std::string::npos || o.arch == "mixtral";
  if (o.arch == "mixtral") o.arch = "llama";  // llama with experts
  if (moe) {
    o.n_expert = 4;
    o.n_expert_used = 2;
    o.n_ff_exp = 128;
    o.n_ff_shexp = 256;
  }
  auto model = load_synth(o);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  EXPECT_STREQ((*model)->config().arch->name, o.arch.c_str());
  EXPECT_EQ((*model)->config().n_expert, moe ? 4 : 0);
  EXPECT_EQ((*model)->layer(0).bq.empty(), o.arch != "qwen2" && o.arch != "qwen2moe");
  EXPECT_EQ((*model)->layer(0).q_norm.empty(), o.arch != "qwen3" && o.arch != "qwen3moe" && o.arch != "olmoe");
  EXPECT_EQ((*model)->layer(0).gate_exps.size(), moe ? 4u : 0u);
  EXPECT_EQ((*model)->layer(0).shexp_gate.empty(), o.arch != "qwen2moe");
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
                                                              "olmoe", "mixtral"),
                                            ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0,
                                                              GgmlType::kQ4_0)),
                         [](const auto& param_info) {
                           return std::string(std::get<0>(param_info.param)) + "_" +
                                  std::string(ggml_type_name(std::get<1>(param_info.param)));
                         });

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
