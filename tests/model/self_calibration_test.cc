// Self-calibration (model/self_calibration.h): the text a model writes for
// itself starts each window at its start token, is the same for a seed,
// is the model's own (far likelier under it than chance), and gives an
// importance matrix over every matmul input, as calibration text does.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "model/forward.h"
#include "model/imatrix_collect.h"
#include "model/self_calibration.h"
#include "model/tokenizer/tokenizer.h"
#include "quant/rotation.h"
#include "testdata.h"

namespace ork {
namespace {

std::unique_ptr<Model> load(const char* relative) {
  auto m = Model::load(testing::testdata(relative));
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

// Mean negative log-likelihood per predicted token of each window under the model.
double mean_nll(const Model& model, const std::vector<int32_t>& tokens, int n_ctx) {
  Context ctx(model, n_ctx);
  const size_t v = static_cast<size_t>(model.config().n_vocab);
  double sum = 0;
  size_t n = 0;
  for (size_t at = 0; at + static_cast<size_t>(n_ctx) <= tokens.size(); at += static_cast<size_t>(n_ctx)) {
    ctx.truncate(0);
    std::span<const int32_t> w(tokens.data() + at, static_cast<size_t>(n_ctx));
    auto logits = ctx.eval(w, /*all_logits=*/true);
    EXPECT_TRUE(logits.is_ok()) << logits.status().to_string();
    if (!logits.is_ok()) return 0;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      const float* row = logits->data() + i * v;
      double mx = row[0];
      for (size_t j = 1; j < v; ++j) mx = std::max<double>(mx, row[j]);
      double z = 0;
      for (size_t j = 0; j < v; ++j) z += std::exp(row[j] - mx);
      sum += std::log(z) + mx - row[w[i + 1]];
      ++n;
    }
  }
  return sum / static_cast<double>(n);
}

TEST(SelfCalibration, WindowsBeginAtTheStartTokenAndAreReproducible) {
  ORK_REQUIRE_TESTDATA("models/tinystories656K-f32.gguf");
  auto model = load("models/tinystories656K-f32.gguf");
  ASSERT_NE(model, nullptr);
  auto tok = Tokenizer::from_gguf(model->gguf());
  ASSERT_TRUE(tok.is_ok());
  int steps = 0;
  auto a = generate_calibration(*model, 4, 32, 1, [&](int done, int total) {
    EXPECT_EQ(total, 31);
    steps = done;
  });
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(steps, 31);
  EXPECT_EQ(a->start, (*tok)->bos());
  ASSERT_EQ(a->tokens.size(), 4u * 32u);
  std::set<std::vector<int32_t>> distinct;
  for (size_t w = 0; w < 4; ++w) {
    EXPECT_EQ(a->tokens[w * 32], a->start) << "window " << w;
    distinct.insert(std::vector<int32_t>(a->tokens.begin() + static_cast<long>(w * 32),
                                         a->tokens.begin() + static_cast<long>((w + 1) * 32)));
  }
  EXPECT_EQ(distinct.size(), 4u) << "each window is its own sample";
  for (int32_t t : a->tokens) ASSERT_TRUE(t >= 0 && t < model->config().n_vocab) << t;
  auto b = generate_calibration(*model, 4, 32, 1, nullptr);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(a->tokens, b->tokens) << "the same seed writes the same text";
  auto c = generate_calibration(*model, 4, 32, 2, nullptr);
  ASSERT_TRUE(c.is_ok());
  EXPECT_NE(a->tokens, c->tokens) << "another seed, another text";
}

// Sampled at kSelfCalibrationTemperature the text is still the model's: per
// token it is far likelier under the model than tokens drawn at random.
TEST(SelfCalibration, TheTextIsTheModelsOwn) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto model = load("models/sotu-moe-f32.gguf");
  ASSERT_NE(model, nullptr);
  auto text = generate_calibration(*model, 4, 64, 1, nullptr);
  ASSERT_TRUE(text.is_ok()) << text.status().to_string();
  const double own = mean_nll(*model, text->tokens, 64);
  std::vector<int32_t> random = text->tokens;
  uint64_t s = 12345;
  for (size_t i = 0; i < random.size(); ++i) {
    if (i % 64 == 0) continue;  // keep each window's start
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    random[i] = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(model->config().n_vocab));
  }
  const double chance = mean_nll(*model, random, 64);
  EXPECT_LT(own, 0.7 * std::log(static_cast<double>(model->config().n_vocab)));  // 4.3 of 7.6 nats here
  EXPECT_LT(own, chance - 3.0) << "own " << own << " nats a token, random tokens " << chance;
}

TEST(SelfCalibration, TheImportanceMatrixCoversEveryMatmulInput) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto model = load("models/sotu-moe-f32.gguf");
  ASSERT_NE(model, nullptr);
  auto text = generate_calibration(*model, 2, 64, 1, nullptr);
  ASSERT_TRUE(text.is_ok());
  auto own = collect_importance(*model, text->tokens, 64, kDefaultRotationSeed, text->start, nullptr);
  ASSERT_TRUE(own.is_ok()) << own.status().to_string();
  // The same collection on tokens that are not the model's text: the
  // entries (one per matmul input, experts included) are the same set.
  std::vector<int32_t> other(text->tokens.size());
  for (size_t i = 0; i < other.size(); ++i) other[i] = static_cast<int32_t>(3 + i % 500);
  auto ref = collect_importance(*model, other, 64, kDefaultRotationSeed, text->start, nullptr);
  ASSERT_TRUE(ref.is_ok());
  ASSERT_EQ(own->entries().size(), ref->entries().size());
  for (const auto& [name, e] : ref->entries()) EXPECT_TRUE(own->entries().count(name)) << name;
  EXPECT_EQ(own->tokens(), text->tokens.size());
}

TEST(SelfCalibration, RefusesWhatItCannotWrite) {
  ORK_REQUIRE_TESTDATA("models/tinystories656K-f32.gguf");
  auto model = load("models/tinystories656K-f32.gguf");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(generate_calibration(*model, 0, 32, 1, nullptr).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(generate_calibration(*model, 2, 1, 1, nullptr).status().code(), StatusCode::kInvalidArgument);
  auto past = generate_calibration(*model, 1, model->config().n_ctx_train + 1, 1, nullptr);
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("context"), std::string::npos) << past.status().message();
}

}  // namespace
}  // namespace ork
