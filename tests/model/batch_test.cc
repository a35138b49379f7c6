// Continuous batching (Context::eval_together): several sequences in one
// pass give each the logits it gets alone. On the per-token integer tiers
// (i4 ... i6, i8s) the kernels make that exact, bit for bit; on f32 weights
// the batch's GEMM sums in another order than decode's GEMV, and i8 sums
// its blocks of 32 activations in float (kernels/quant_types.h), so within
// float noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/forward.h"
#include "quant/packer.h"
#include "testdata.h"

namespace ork {
namespace {

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// Three sequences: prompts of different lengths, then steps where one
// prefills a new chunk while the others decode, then all decode - the
// server's mixed batches - against each sequence evaluated alone.
void check_together(const Model& model, bool fast, float tolerance, const std::string& what) {
  const std::vector<std::vector<int32_t>> prompts = {{1, 403, 407, 261, 378}, {1, 17}, {1, 99, 100, 101, 102, 103, 104}};
  const std::vector<std::vector<std::vector<int32_t>>> steps = {
      {{432}, {99, 100, 101}, {7}},  // sequence 1 takes a chunk
      {{5}, {6}, {8}},
      {{9}, {10}, {11}},
  };
  std::vector<std::unique_ptr<Context>> together, alone;
  for (size_t s = 0; s < prompts.size(); ++s) {
    together.push_back(std::make_unique<Context>(model, 64));
    alone.push_back(std::make_unique<Context>(model, 64));
    together.back()->set_fast_kernels(fast);
    alone.back()->set_fast_kernels(fast);
  }
  const size_t vocab = static_cast<size_t>(model.config().n_vocab);
  std::vector<Context*> ptrs;
  for (auto& c : together) ptrs.push_back(c.get());
  auto compare = [&](const std::vector<std::vector<int32_t>>& batch, const std::string& at) {
    std::vector<std::span<const int32_t>> spans(batch.begin(), batch.end());
    std::vector<float> logits;
    const Status st = Context::eval_together(ptrs, spans, logits);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    ASSERT_EQ(logits.size(), batch.size() * vocab);
    for (size_t s = 0; s < batch.size(); ++s) {
      std::vector<float> one;
      ASSERT_TRUE(alone[s]->eval(batch[s], one).is_ok());
      const std::span<const float> got(&logits[s * vocab], vocab);
      if (tolerance == 0) {
        EXPECT_TRUE(std::equal(one.begin(), one.end(), got.begin())) << what << " " << at << " sequence " << s;
      } else {
        EXPECT_LE(max_abs_diff(got, one), tolerance) << what << " " << at << " sequence " << s;
      }
      EXPECT_EQ(together[s]->n_past(), alone[s]->n_past());
    }
  };
  compare(prompts, "prompts");
  for (size_t i = 0; i < steps.size(); ++i) compare(steps[i], "step " + std::to_string(i));
}

TEST(EvalTogether, F32WeightsMatchEachSequenceAlone) {
  ORK_REQUIRE_TESTDATA("models/stories260K-f32.gguf");
  auto model = Model::load(testing::testdata("models/stories260K-f32.gguf"));
  ASSERT_TRUE(model.is_ok());
  check_together(**model, true, 2e-4f, "fast");
  check_together(**model, false, 2e-4f, "reference");
}

TEST(EvalTogether, QuantizedTiersMatchEachSequenceAloneExactly) {
  ORK_REQUIRE_TESTDATA("models/tinystories656K-f32.gguf");
  for (const char* tier : {"i4", "i8s"}) {
    PackOptions o;
    o.input = testing::testdata("models/tinystories656K-f32.gguf");
    o.output = ::testing::TempDir() + "/together.orkpack";
    o.rules = {*parse_tier_rule(std::string(".=") + tier)};
    ASSERT_TRUE(pack_model(o).is_ok());
    auto model = Model::load(o.output);
    ASSERT_TRUE(model.is_ok());
    check_together(**model, true, 0.0f, tier);
  }
}

TEST(EvalTogether, MixtureOfExpertsMatchesEachSequenceAlone) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  PackOptions o;
  o.input = testing::testdata("models/sotu-moe-f32.gguf");
  o.output = ::testing::TempDir() + "/together-moe.orkpack";
  for (const char* tier : {"i8s", "i8"}) {
    o.rules = {*parse_tier_rule(std::string(".=") + tier)};
    ASSERT_TRUE(pack_model(o).is_ok());
    auto model = Model::load(o.output);
    ASSERT_TRUE(model.is_ok());
    // i8: the blocks' float order differs between a batch and a token
    // alone, and a last-bit change can round a later activation code the
    // other way: logits within 0.1 (measured 0.045 at most here).
    check_together(**model, true, std::string(tier) == "i8" ? 0.1f : 0.0f, std::string("moe ") + tier);
  }
}

TEST(EvalTogether, RefusesWhatItCannotTakeAndChangesNothing) {
  ORK_REQUIRE_TESTDATA("models/stories260K-f32.gguf");
  auto model = Model::load(testing::testdata("models/stories260K-f32.gguf"));
  auto other = Model::load(testing::testdata("models/stories260K-f32.gguf"));
  ASSERT_TRUE(model.is_ok() && other.is_ok());
  Context a(**model, 8), b(**model, 8), c(**other, 8);
  const std::vector<int32_t> two = {1, 5}, nine(9, 5), bad = {100000};
  std::vector<float> logits;
  auto together = [&](std::vector<Context*> ctxs, std::vector<std::span<const int32_t>> toks) {
    return Context::eval_together(ctxs, toks, logits);
  };
  EXPECT_FALSE(together({&a, &b}, {two, nine}).is_ok());  // b's context holds 8
  EXPECT_FALSE(together({&a, &b}, {two, bad}).is_ok());
  EXPECT_FALSE(together({&a, &a}, {two, two}).is_ok());
  EXPECT_FALSE(together({&a, &c}, {two, two}).is_ok());  // another model
  EXPECT_FALSE(together({&a}, {two, two}).is_ok());
  EXPECT_FALSE(together({}, {}).is_ok());
  EXPECT_EQ(a.n_past(), 0);
  EXPECT_EQ(b.n_past(), 0);
  EXPECT_TRUE(together({&a, &b}, {two, two}).is_ok());
  EXPECT_EQ(a.n_past(), 2);
  EXPECT_EQ(b.n_past(), 2);
}

}  // namespace
}  // namespace ork
