// A model whose file disagrees with itself is refused at load, naming the
// key or tensor; a model that computes NaN is refused when it does, never
// reported as a success.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "format/gguf/gguf_writer.h"
#include "model/forward.h"
#include "testdata.h"

namespace ork {
namespace {

constexpr const char* kModel = "models/tinystories656K-f32.gguf";

// The model's GGUF copied with `keys` overriding metadata and `edit`
// changing F32 tensor values, its matrices stored as `matrix_type` (F32,
// F16 or BF16); the load's status.
Status load_edited(const GgufFile& src, const std::vector<std::pair<std::string, GgufValue>>& keys,
                   const std::function<void(const std::string&, std::vector<float>&)>& edit,
                   std::unique_ptr<Model>* out = nullptr, GgmlType matrix_type = GgmlType::kF32) {
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) w.set(key, value);
  for (const auto& [key, value] : keys) w.set(key, value);
  for (const GgufTensorInfo& t : src.tensors()) {
    std::vector<float> data(t.elems);
    std::memcpy(data.data(), t.data, t.bytes);
    if (edit) edit(t.name, data);
    const GgmlType type = t.dims.size() == 2 ? matrix_type : GgmlType::kF32;
    std::vector<uint8_t> bytes(data.size() * (type == GgmlType::kF32 ? 4 : 2));
    for (size_t i = 0; i < data.size(); ++i) {
      if (type == GgmlType::kF32) {
        std::memcpy(&bytes[4 * i], &data[i], 4);
      } else {
        const uint16_t h = type == GgmlType::kF16 ? f32_to_f16(data[i]) : f32_to_bf16(data[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
    }
    EXPECT_TRUE(w.add_tensor(t.name, type, t.dims, bytes).is_ok());
  }
  auto gguf = GgufFile::parse(MappedFile::from_bytes(*w.write_memory(), "edited.gguf"));
  if (!gguf.is_ok()) return gguf.status();
  auto model = Model::load(std::move(gguf).value());
  if (!model.is_ok()) return model.status();
  if (out != nullptr) *out = std::move(model).value();
  return Status::ok();
}

TEST(ModelChecks, TensorsBeyondTheBlockCountAreRefused) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto src = GgufFile::open(testing::testdata(kModel));
  ASSERT_TRUE(src.is_ok());
  // The file has two blocks; metadata that says one would silently drop a layer.
  const Status s = load_edited(*src, {{"llama.block_count", GgufValue::make_uint32(1)}}, nullptr);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("edited.gguf: tensor 'blk.1.attn_norm.weight' belongs to block 1, but metadata "
                             "'llama.block_count' = 1"),
            std::string::npos)
      << s.message();
  // Too many blocks: the first missing tensor is named.
  const Status more = load_edited(*src, {{"llama.block_count", GgufValue::make_uint32(3)}}, nullptr);
  EXPECT_NE(more.message().find("tensor 'blk.2.attn_norm.weight' is missing"), std::string::npos) << more.message();
}

TEST(ModelChecks, NonFiniteWeightsAreRefusedAtLoadByName) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto src = GgufFile::open(testing::testdata(kModel));
  ASSERT_TRUE(src.is_ok());
  for (const char* tensor : {"blk.1.ffn_norm.weight", "blk.0.attn_v.weight"}) {
    const Status s = load_edited(*src, {}, [&](const std::string& name, std::vector<float>& data) {
      if (name == tensor) data[data.size() / 2] = std::numeric_limits<float>::quiet_NaN();
    });
    ASSERT_FALSE(s.is_ok()) << tensor;
    EXPECT_NE(s.message().find(std::string("tensor '") + tensor + "' holds"), std::string::npos) << s.message();
  }
}

// The scan finds the first value that is not finite wherever it lies (it
// reads blocks of 16384 values without stopping, then the block that has
// one value by value), in every float type a GGUF holds matrices in:
// token_embd is 2048 rows of 128.
TEST(ModelChecks, TheFirstNonFiniteWeightIsFoundInEveryFloatType) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto src = GgufFile::open(testing::testdata(kModel));
  ASSERT_TRUE(src.is_ok());
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    ASSERT_TRUE(load_edited(*src, {}, nullptr, nullptr, type).is_ok()) << ggml_type_name(type);
    for (size_t at : {size_t{0}, size_t{16383}, size_t{16384}, size_t{16385 + 130}, size_t{2048 * 128 - 1}}) {
      for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN()}) {
        const Status s = load_edited(*src, {}, [&](const std::string& name, std::vector<float>& data) {
          if (name != "token_embd.weight") return;
          data[at] = bad;
          data[std::min(at + 700, data.size() - 1)] = bad;  // a later one, in the same block or the next
        }, nullptr, type);
        ASSERT_FALSE(s.is_ok()) << ggml_type_name(type) << " at " << at;
        EXPECT_NE(s.message().find("tensor 'token_embd.weight' holds a value that is not finite in row " +
                                   std::to_string(at / 128) + ";"),
                  std::string::npos)
            << ggml_type_name(type) << " at " << at << ": " << s.message();
      }
    }
  }
}

// Weights that overflow to infinity in the forward pass, though each is
// finite: eval says so instead of handing NaN logits to the sampler.
TEST(ModelChecks, ANonFiniteLogitIsAnError) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto src = GgufFile::open(testing::testdata(kModel));
  ASSERT_TRUE(src.is_ok());
  std::unique_ptr<Model> model;
  ASSERT_TRUE(load_edited(*src, {}, [](const std::string& name, std::vector<float>& data) {
                if (name == "output_norm.weight") {
                  for (float& v : data) v = 3e38f;
                }
              }, &model).is_ok());
  for (bool fast : {true, false}) {
    Context ctx(*model, 16);
    ctx.set_fast_kernels(fast);
    std::vector<float> logits;
    const std::vector<int32_t> ids = {1, 80, 147};
    const Status s = ctx.eval(ids, logits);
    ASSERT_FALSE(s.is_ok()) << fast;
    EXPECT_EQ(s.code(), StatusCode::kNumerical);
    EXPECT_NE(s.message().find("the model's weights hold NaN or infinite values"), std::string::npos) << s.message();
  }
}

TEST(ModelChecks, ContextMemoryIsKnownBeforeItIsAllocated) {
  ORK_REQUIRE_TESTDATA(kModel);
  auto model = Model::load(testing::testdata(kModel));
  ASSERT_TRUE(model.is_ok());
  const ModelConfig& c = (*model)->config();
  // f16 K and V per layer and position dominate.
  const uint64_t cache = 2ull * c.n_layer * 512 * c.kv_dim() * 2;
  EXPECT_GE(Context::memory_bytes(c, 512, 1), cache);
  EXPECT_LT(Context::memory_bytes(c, 512, 1), cache + (uint64_t{1} << 20));
  const uint64_t ratio = Context::memory_bytes(c, 1 << 20, 1) / Context::memory_bytes(c, 1 << 10, 1);
  EXPECT_GE(ratio, 900u);  // the per-token scratch does not grow with the context
  EXPECT_LE(ratio, 1024u);
  EXPECT_GT(Context::memory_bytes(c, 512, 64, false), Context::memory_bytes(c, 512, 64, true));
}

}  // namespace
}  // namespace ork
