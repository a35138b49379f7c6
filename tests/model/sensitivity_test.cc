// Measured sensitivity (model/sensitivity.h): each matrix of a real model
// quantized alone moves the logits by a measured KL divergence - the
// embedding far more than the last down projection, as ork pack
// --sensitivity found on tinystories656K - the model is the same
// afterwards, a MoE tensor's experts are measured together, and a probe
// that does not fit the model is refused by name.
#include <gtest/gtest.h>

#include "core/mapped_file.h"
#include "format/orkpack/orkpack.h"
#include "model/forward.h"
#include "model/sensitivity.h"
#include "quant/packer.h"
#include "quant/planner.h"
#include "testdata.h"

namespace ork {
namespace {

constexpr const char* kModel = "models/tinystories656K-f32.gguf";
constexpr const char* kMoe = "models/sotu-moe-f32.gguf";

std::unique_ptr<Model> load(const char* relative) {
  auto m = Model::load(testing::testdata(relative));
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

// The model with every matrix at nf4, packed in memory.
std::unique_ptr<Model> nf4_probe(const char* relative) {
  PackOptions o;
  o.input = testing::testdata(relative);
  o.output = "probe";
  o.rules = {TierRule{".", Tier::kNf4}};
  MappedFile image;
  o.in_memory = &image;
  auto report = pack_model(o);
  EXPECT_TRUE(report.is_ok()) << report.status().to_string();
  auto file = OrkpackFile::parse(std::move(image));
  EXPECT_TRUE(file.is_ok()) << file.status().to_string();
  auto m = Model::load(std::move(file).value());
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

std::vector<int32_t> some_tokens(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(3 + (i * 7919) % 2000);
  return t;
}

TEST(Sensitivity, EachMatrixMovesTheLogitsAndTheModelIsRestored) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto model = load(kModel);
  auto probe = nf4_probe(kModel);
  ASSERT_TRUE(model && probe);
  const std::vector<int32_t> ids = {1, 80, 147, 201, 282, 57, 300};
  const std::vector<float> before = *Context(*model, 16).eval(ids);
  SensitivityOptions so;
  so.n_ctx = 64;
  so.chunks = 4;
  int calls = 0;
  auto s = measure_sensitivity(*model, *probe, some_tokens(4 * 64), 1, so, [&](int done, int total) {
    ++calls;
    EXPECT_EQ(done, calls);
    EXPECT_EQ(total, 15);
  });
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  // Two layers of seven matrices and the embedding, which is also the
  // output matrix (tied): measured once, both moving together.
  EXPECT_EQ(s->size(), 15u);
  EXPECT_EQ(calls, 15);
  for (const auto& [name, kld] : *s) EXPECT_GT(kld, 0.0) << name;
  // Measured on calibration text: 0.0408 against 0.0029.
  EXPECT_GT(s->at("token_embd.weight"), 3 * s->at("blk.1.ffn_down.weight"));
  const std::vector<float> after = *Context(*model, 16).eval(ids);
  EXPECT_EQ(before, after);
}

TEST(Sensitivity, ExpertsAreMeasuredTogetherUnderTheirTensor) {
  ORK_REQUIRE_TESTDATA(kMoe);
  auto model = load(kMoe);
  auto same = load(kMoe);  // a probe with the model's own weights: nothing moves
  ASSERT_TRUE(model && same);
  SensitivityOptions so;
  so.n_ctx = 32;
  so.chunks = 1;
  so.skip = [](const std::string& g) { return g.find("ffn_gate_inp") != std::string::npos; };
  auto s = measure_sensitivity(*model, *same, some_tokens(32), 1, so);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_TRUE(s->count("blk.0.ffn_down_exps.weight")) << s->begin()->first;
  for (const auto& [name, kld] : *s) {
    EXPECT_EQ(matrix_group(name), name) << "an expert measured alone";
    EXPECT_EQ(name.find("ffn_gate_inp"), std::string::npos) << name;
    EXPECT_NEAR(kld, 0.0, 1e-9) << name;
  }
}

TEST(Sensitivity, AProbeOfAnotherModelIsRefusedByName) {
  ORK_REQUIRE_TESTDATA(kModel);
  ORK_REQUIRE_TESTDATA("models/stories260K-f32.gguf");
  auto model = load(kModel);
  auto other = load("models/stories260K-f32.gguf");
  ASSERT_TRUE(model && other);
  auto s = measure_sensitivity(*model, *other, some_tokens(64), 1, SensitivityOptions{});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.status().message().find("token_embd.weight"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("stories260K-f32.gguf"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace ork
