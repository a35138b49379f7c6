// Greedy generation from BOS reproduces llama.cpp's token ids exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include <unistd.h>

#include "model/forward.h"
#include "quant/packer.h"
#include "testdata.h"

namespace ork {
namespace {

// The golden .ids files are one line of "[id][id]..." (after BOS).
std::vector<int32_t> read_bracketed_ids(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<int32_t> ids;
  for (size_t at = text.find('['); at != std::string::npos; at = text.find('[', at + 1)) {
    ids.push_back(std::stoi(text.substr(at + 1)));
  }
  return ids;
}

void check_greedy(const std::string& model_name, const std::string& golden) {
  const std::vector<int32_t> want = read_bracketed_ids(testing::testdata(golden));
  ASSERT_FALSE(want.empty());
  auto model = Model::load(testing::testdata(model_name));
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  Context ctx(**model, static_cast<int>(want.size()) + 1);
  int32_t token = 1;  // BOS
  for (size_t i = 0; i < want.size(); ++i) {
    auto logits = ctx.eval(std::span<const int32_t>(&token, 1));
    ASSERT_TRUE(logits.is_ok()) << logits.status().to_string();
    token = static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
    ASSERT_EQ(token, want[i]) << "at generated token " << i;
  }
}

TEST(Golden, Stories260KGreedy256) {
  ORK_REQUIRE_TESTDATA("models/stories260K-f32.gguf");
  check_greedy("models/stories260K-f32.gguf", "golden/stories260K_greedy_256.ids");
}

TEST(Golden, TinyStories656KGreedy128) {
  ORK_REQUIRE_TESTDATA("models/tinystories656K-f32.gguf");
  check_greedy("models/tinystories656K-f32.gguf", "golden/tinystories656K_greedy_128.ids");
}

// From a quantized source, carried as the on-load conversion carries it,
// on the fast kernels: greedy from BOS follows llama.cpp's F32 golden
// wherever the source's own choice is clear (its top logit ahead of the
// second by more than `margin`); a near tie, where the quantization may
// rightly choose otherwise, ends the comparison. At least `min_steps` must
// be checked.
void check_carried_greedy(const std::string& source, const std::string& golden, float margin, size_t min_steps) {
  const std::vector<int32_t> want = read_bracketed_ids(testing::testdata(golden));
  PackOptions o;
  o.input = testing::testdata(source);
  // A file of its own: ctest runs each case as its own process, two at a
  // time, and a shared name let one case load the other's pack.
  const std::string stem = source.substr(source.find_last_of('/') + 1);
  o.output = ::testing::TempDir() + "/golden-carried-" + stem + "-" + std::to_string(::getpid()) + ".orkpack";
  o.source_budget = true;
  o.budget_is_default = true;
  auto report = pack_model(o);
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  auto model = Model::load(o.output);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  Context ctx(**model, static_cast<int>(want.size()) + 1);
  ctx.set_fast_kernels(true);
  int32_t token = 1;  // BOS
  size_t checked = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    auto logits = ctx.eval(std::span<const int32_t>(&token, 1));
    ASSERT_TRUE(logits.is_ok()) << logits.status().to_string();
    std::vector<float> sorted = *logits;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    token = static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
    if (sorted[0] - sorted[1] <= margin) break;
    ASSERT_EQ(token, want[i]) << source << " at generated token " << i;
    ++checked;
  }
  std::printf("%s: greedy equals the F32 golden for %zu of %zu tokens checked\n", source.c_str(), checked, want.size());
  EXPECT_GE(checked, min_steps) << source;
}

TEST(Golden, TinyStories656KQ8_0CarriedGreedy) {
  ORK_REQUIRE_TESTDATA("fixtures/quality/models/tinystories656k-Q8_0-pure.gguf");
  check_carried_greedy("fixtures/quality/models/tinystories656k-Q8_0-pure.gguf", "golden/tinystories656K_greedy_128.ids",
                       0.03f, 32);
}

TEST(Golden, Stories260KQ6_KCarriedGreedy) {
  ORK_REQUIRE_TESTDATA("fixtures/quality/models/stories260K-Q6_K-mix.gguf");
  check_carried_greedy("fixtures/quality/models/stories260K-Q6_K-mix.gguf", "golden/stories260K_greedy_256.ids", 0.1f,
                       32);
}

}  // namespace
}  // namespace ork
