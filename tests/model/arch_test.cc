// Architecture checks that need no reference numbers: a real llama model
// rewritten as another architecture must give the same logits where the
// mathematics says it must.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "model/rewrite.h"
#include "testdata.h"

namespace ork {
namespace {

using testing::is_qk;
using testing::logits;
using testing::max_abs_diff;
using testing::rewrite;
constexpr const char* kModel = testing::kRewriteModel;


// llama's converter interleaves each head's Q/K rows so that RoPE rotates
// adjacent pairs; undoing that permutation and rotating halves (NEOX, as
// qwen2 does) is the same computation. Zero biases must change nothing.
TEST(Arch, Qwen2WithNeoxRowsAndZeroBiasEqualsLlama) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto base = Model::load(testing::testdata(kModel));
  ASSERT_TRUE(base.is_ok());
  const ModelConfig& c = (*base)->config();
  const int hd = c.head_dim;
  const auto biases = testing::qkv_biases(c);
  auto qwen2 = rewrite((*base)->gguf(), "qwen2",
                       [&](const std::string& name, std::vector<float>& data, const GgufTensorInfo& t) {
                         if (!is_qk(name)) return;
                         const size_t cols = t.dims[0];
                         const std::vector<float> old = data;
                         for (size_t row = 0; row < t.dims[1]; ++row) {
                           const size_t head = row / hd, i = row % hd;
                           // new row i < hd/2 takes old row 2i; new row i + hd/2 takes old row 2i + 1
                           const size_t from = i < static_cast<size_t>(hd / 2) ? 2 * i : 2 * (i - hd / 2) + 1;
                           std::memcpy(&data[row * cols], &old[(head * hd + from) * cols], cols * 4);
                         }
                       },
                       biases);
  ASSERT_NE(qwen2, nullptr);
  EXPECT_LE(max_abs_diff(logits(**base), logits(*qwen2)), 1e-4f);
}

// A bias on v shifts every attention output by the same vector, which a
// bias on q or k cannot imitate: the qwen2 biases must actually be added.
TEST(Arch, Qwen2BiasesAreApplied) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto base = Model::load(testing::testdata(kModel));
  ASSERT_TRUE(base.is_ok());
  const ModelConfig& c = (*base)->config();
  const auto biases = testing::qkv_biases(c, 0.5f);
  auto qwen2 = rewrite((*base)->gguf(), "qwen2", [](auto&&...) {}, biases);
  ASSERT_NE(qwen2, nullptr);
  EXPECT_GT(max_abs_diff(logits(**base), logits(*qwen2)), 1e-2f);
}

// With QK-norm, each head of q and k is RMS-normalised before RoPE, so
// scaling one head's rows of Wq or Wk by any positive factor changes
// nothing — and without QK-norm it does.
TEST(Arch, Qwen3QkNormMakesHeadsScaleInvariant) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto base = Model::load(testing::testdata(kModel));
  ASSERT_TRUE(base.is_ok());
  const ModelConfig& c = (*base)->config();
  const size_t hd = static_cast<size_t>(c.head_dim);
  std::vector<float> ones(hd, 1.0f), norm_w(hd);
  for (size_t i = 0; i < hd; ++i) norm_w[i] = 0.5f + 0.05f * static_cast<float>(i % 7);
  std::vector<std::pair<std::string, std::vector<float>>> norms;
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norms.push_back({p + "attn_q_norm.weight", norm_w});
    norms.push_back({p + "attn_k_norm.weight", norm_w});
  }
  auto scale_head = [&](float factor) {
    return [=](const std::string& name, std::vector<float>& data, const GgufTensorInfo& t) {
      if (!is_qk(name)) return;
      const size_t cols = t.dims[0];
      for (size_t row = hd; row < 2 * hd; ++row) {  // head 1 only
        for (size_t k = 0; k < cols; ++k) data[row * cols + k] *= factor;
      }
    };
  };
  auto plain = rewrite((*base)->gguf(), "qwen3", [](auto&&...) {}, norms);
  auto scaled = rewrite((*base)->gguf(), "qwen3", scale_head(7.0f), norms);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(scaled, nullptr);
  EXPECT_LE(max_abs_diff(logits(*plain), logits(*scaled)), 1e-4f);
  auto llama_scaled = rewrite((*base)->gguf(), "llama", scale_head(7.0f));
  EXPECT_GT(max_abs_diff(logits(**base), logits(*llama_scaled)), 1e-2f);
}

TEST(Arch, UnreadableTensorTypeIsNamed) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto gguf = GgufFile::open(testing::testdata(kModel));
  ASSERT_TRUE(gguf.is_ok());
  GgufWriter w;
  for (const auto& [key, value] : gguf->metadata()) w.set(key, value);
  for (const GgufTensorInfo& t : gguf->tensors()) {
    if (t.name == "blk.0.ffn_up.weight") {
      // I8 is a valid ggml type that ork has no weight reader for.
      ASSERT_TRUE(w.add_tensor(t.name, GgmlType::kI8, t.dims, std::vector<uint8_t>(t.elems)).is_ok());
      continue;
    }
    ASSERT_TRUE(w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.bytes)).is_ok());
  }
  auto bad = GgufFile::parse(MappedFile::from_bytes(*w.write_memory(), "i8.gguf"));
  ASSERT_TRUE(bad.is_ok());
  auto model = Model::load(std::move(bad).value());
  ASSERT_FALSE(model.is_ok());
  EXPECT_EQ(model.status().code(), StatusCode::kUnsupported) << model.status().message();
  EXPECT_NE(model.status().message().find("tensor 'blk.0.ffn_up.weight' has type I8"), std::string::npos)
      << model.status().message();
}

}  // namespace
}  // namespace ork
