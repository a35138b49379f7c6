// Greedy generation from BOS reproduces llama.cpp's token ids exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "model/forward.h"
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

}  // namespace
}  // namespace ork
