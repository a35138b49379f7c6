// The q8_0 KV cache (Context::set_kv_types) through the whole model: it
// follows the f16 cache closely on a trained model, a prompt in one batch
// and token by token agree, a session saved with it loads back bit for
// bit, and what it cannot run is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "model/forward.h"
#include "ork/ork.hpp"
#include "testdata.h"

namespace ork {
namespace {

constexpr KvTypes kQ8{KvType::kQ8_0, KvType::kQ8_0};

// The trained MoE through the public API (for its tokenizer), and the
// first n tokens of the calibration text as it spells them.
std::unique_ptr<api::LoadedModel> load_sotu() {
  auto m = api::LoadedModel::load(testing::testdata("models/sotu-moe-f32.gguf"));
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

std::vector<int32_t> text_tokens(const api::LoadedModel& model, size_t n) {
  std::ifstream in(testing::testdata("corpus/sotu-calibration.txt"));
  std::string text(8192, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<int32_t> ids = model.tokenize(text, true, false);
  ids.resize(std::min(ids.size(), n));
  return ids;
}

// KL(p || q) of two logit vectors' softmaxes.
double kld(std::span<const float> p_logits, std::span<const float> q_logits) {
  auto log_softmax = [](std::span<const float> x) {
    const float m = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (float v : x) sum += std::exp(static_cast<double>(v - m));
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = (x[i] - m) - std::log(sum);
    return out;
  };
  const auto lp = log_softmax(p_logits), lq = log_softmax(q_logits);
  double k = 0;
  for (size_t i = 0; i < lp.size(); ++i) k += std::exp(lp[i]) * (lp[i] - lq[i]);
  return k;
}

TEST(KvCacheQ8, FollowsTheF16CacheOnATrainedModel) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto loaded = load_sotu();
  ASSERT_NE(loaded, nullptr);
  const Model* model = &loaded->internal();
  const std::vector<int32_t> ids = text_tokens(*loaded, 240);
  ASSERT_EQ(ids.size(), 240u);
  Context f16(*model, 256), q8(*model, 256);
  ASSERT_TRUE(q8.set_kv_types(kQ8).is_ok());
  std::vector<float> a, b;
  const std::span<const int32_t> prompt(ids.data(), 160);
  ASSERT_TRUE(f16.eval(prompt, a).is_ok());
  ASSERT_TRUE(q8.eval(prompt, b).is_ok());
  double kl_sum = 0, kl_max = 0;
  int same_top = 0, steps = 0;
  float max_diff = 0;
  for (size_t t = 160; t < ids.size(); ++t, ++steps) {
    ASSERT_TRUE(f16.eval(std::span<const int32_t>(&ids[t], 1), a).is_ok());
    ASSERT_TRUE(q8.eval(std::span<const int32_t>(&ids[t], 1), b).is_ok());
    const double k = kld(a, b);
    kl_sum += k, kl_max = std::max(kl_max, k);
    same_top += std::max_element(a.begin(), a.end()) == a.begin() + (std::max_element(b.begin(), b.end()) - b.begin());
    for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
  }
  // Int8 keys and values are not f16's: different logits, close ones.
  EXPECT_GT(max_diff, 0.0f);
  EXPECT_LT(kl_sum / steps, 5e-4) << "max " << kl_max << " top " << same_top << "/" << steps << " diff " << max_diff;
  EXPECT_GE(same_top, steps - 2);
}

TEST(KvCacheQ8, APromptInOneBatchAndTokenByTokenAgree) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto loaded = load_sotu();
  ASSERT_NE(loaded, nullptr);
  const Model* model = &loaded->internal();
  const std::vector<int32_t> ids = text_tokens(*loaded, 70);
  Context batch(*model, 128), steps(*model, 128);
  ASSERT_TRUE(batch.set_kv_types(kQ8).is_ok());
  ASSERT_TRUE(steps.set_kv_types(kQ8).is_ok());
  std::vector<float> a, b;
  ASSERT_TRUE(batch.eval(ids, a).is_ok());
  for (int32_t t : ids) ASSERT_TRUE(steps.eval(std::span<const int32_t>(&t, 1), b).is_ok());
  // The same cache rows either way; f32 weights' batch GEMM and decode GEMV
  // sum in other orders, so within float noise.
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  EXPECT_LT(m, 2e-3f);
}

TEST(KvCacheQ8, ASavedSessionLoadsBackBitForBit) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto loaded = load_sotu();
  ASSERT_NE(loaded, nullptr);
  const Model* model = &loaded->internal();
  const std::vector<int32_t> ids = text_tokens(*loaded, 41);  // 40 saved: two whole key tiles and a half
  const std::span<const int32_t> saved(ids.data(), 37);
  Context first(*model, 64);
  ASSERT_TRUE(first.set_kv_types(kQ8).is_ok());
  std::vector<float> logits, want, got;
  ASSERT_TRUE(first.eval(saved, logits).is_ok());
  const std::string path = ::testing::TempDir() + "/kv_q8.session";
  ASSERT_TRUE(first.save_state(path, saved).is_ok());
  ASSERT_TRUE(first.eval(std::span<const int32_t>(&ids[37], 4), want).is_ok());

  Context second(*model, 64);
  ASSERT_TRUE(second.set_kv_types(kQ8).is_ok());
  auto tokens = second.load_state(path);
  ASSERT_TRUE(tokens.is_ok()) << tokens.status().to_string();
  EXPECT_EQ(*tokens, std::vector<int32_t>(saved.begin(), saved.end()));
  ASSERT_TRUE(second.eval(std::span<const int32_t>(&ids[37], 4), got).is_ok());
  EXPECT_EQ(got, want);

  // A session of another cache type says what each holds.
  Context f16(*model, 64);
  auto refused = f16.load_state(path);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().to_string().find("q8_0 key and q8_0 value cache; this session runs the fast kernels "
                                              "with a f16 key and f16 value cache"),
            std::string::npos)
      << refused.status().to_string();
}

TEST(KvCacheQ8, RefusedByNameWhereItCannotRun) {
  ORK_REQUIRE_TESTDATA("models/tinystories656K-f32.gguf");
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto small = Model::load(testing::testdata("models/tinystories656K-f32.gguf"));  // heads of 16
  ASSERT_TRUE(small.is_ok());
  Context c(**small, 64);
  const Status st = c.set_kv_types(kQ8);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.to_string().find("head size divisible by 32 (at most 512); this model's heads are 16"), std::string::npos)
      << st.to_string();
  auto sotu = Model::load(testing::testdata("models/sotu-moe-f32.gguf"));
  ASSERT_TRUE(sotu.is_ok());
  Context d(**sotu, 64);
  const Status v_only = d.set_kv_types({KvType::kF16, KvType::kQ8_0});
  EXPECT_NE(v_only.to_string().find("a q8_0 value cache needs a q8_0 key cache"), std::string::npos) << v_only.to_string();
  EXPECT_EQ(d.kv_types().k, KvType::kF16);  // unchanged
  EXPECT_EQ(d.kv_types().v, KvType::kF16);
}

}  // namespace
}  // namespace ork
