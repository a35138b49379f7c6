// Architecture checks that need no reference numbers: a real llama model
// rewritten as another architecture must give the same logits where the
// mathematics says it must.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "format/gguf/gguf_writer.h"
#include "model/forward.h"
#include "testdata.h"

namespace ork {
namespace {

constexpr const char* kModel = "models/tinystories656K-f32.gguf";

// Copies a GGUF, renaming the architecture's keys to `arch` and letting
// `edit` change tensors (F32 data as floats) or add new ones.
using Edit = std::function<void(const std::string& name, std::vector<float>& data, const GgufTensorInfo& t)>;

std::unique_ptr<Model> rewrite(const GgufFile& src, const std::string& arch, const Edit& edit,
                               const std::vector<std::pair<std::string, std::vector<float>>>& extra = {}) {
  GgufWriter w;
  const std::string old_arch = *src.get_string("general.architecture");
  for (const auto& [key, value] : src.metadata()) {
    std::string k = key;
    if (k.rfind(old_arch + ".", 0) == 0) k = arch + k.substr(old_arch.size());
    w.set(k, value);
  }
  w.set("general.architecture", GgufValue::make_string(arch));
  for (const GgufTensorInfo& t : src.tensors()) {
    std::vector<float> data(t.elems);
    std::memcpy(data.data(), t.data, t.bytes);
    edit(t.name, data, t);
    std::vector<uint8_t> bytes(t.bytes);
    std::memcpy(bytes.data(), data.data(), t.bytes);
    EXPECT_TRUE(w.add_tensor(t.name, GgmlType::kF32, t.dims, bytes).is_ok());
  }
  for (const auto& [name, values] : extra) {
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    EXPECT_TRUE(w.add_tensor(name, GgmlType::kF32, {values.size()}, bytes).is_ok());
  }
  auto gguf = GgufFile::parse(MappedFile::from_bytes(*w.write_memory(), arch + ".gguf"));
  EXPECT_TRUE(gguf.is_ok()) << gguf.status().to_string();
  auto model = Model::load(std::move(gguf).value());
  EXPECT_TRUE(model.is_ok()) << model.status().to_string();
  return model.is_ok() ? std::move(model).value() : nullptr;
}

std::vector<float> logits(const Model& m) {
  Context ctx(m, 32);
  const std::vector<int32_t> ids = {1, 80, 147, 201, 282, 57, 300, 1000};
  return *ctx.eval(ids);
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

bool is_qk(const std::string& name) {
  return name.find("attn_q.weight") != std::string::npos || name.find("attn_k.weight") != std::string::npos;
}

// llama's converter interleaves each head's Q/K rows so that RoPE rotates
// adjacent pairs; undoing that permutation and rotating halves (NEOX, as
// qwen2 does) is the same computation. Zero biases must change nothing.
TEST(Arch, Qwen2WithNeoxRowsAndZeroBiasEqualsLlama) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto base = Model::load(testing::testdata(kModel));
  ASSERT_TRUE(base.is_ok());
  const ModelConfig& c = (*base)->config();
  const int hd = c.head_dim;
  std::vector<std::pair<std::string, std::vector<float>>> biases;
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    biases.push_back({p + "attn_q.bias", std::vector<float>(static_cast<size_t>(c.q_dim()), 0.0f)});
    biases.push_back({p + "attn_k.bias", std::vector<float>(static_cast<size_t>(c.kv_dim()), 0.0f)});
    biases.push_back({p + "attn_v.bias", std::vector<float>(static_cast<size_t>(c.kv_dim()), 0.0f)});
  }
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
  std::vector<std::pair<std::string, std::vector<float>>> biases;
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    biases.push_back({p + "attn_q.bias", std::vector<float>(static_cast<size_t>(c.q_dim()), 0.0f)});
    biases.push_back({p + "attn_k.bias", std::vector<float>(static_cast<size_t>(c.kv_dim()), 0.0f)});
    biases.push_back({p + "attn_v.bias", std::vector<float>(static_cast<size_t>(c.kv_dim()), 0.5f)});
  }
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
