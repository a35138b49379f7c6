// A model whose file disagrees with itself is refused at load, naming the
// key or tensor; a model that computes NaN is refused when it does, never
// reported as a success.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "format/gguf/gguf_writer.h"
#include "model/forward.h"
#include "testdata.h"

namespace ork {
namespace {

constexpr const char* kModel = "models/tinystories656K-f32.gguf";

// The model's GGUF copied with `keys` overriding metadata and `edit`
// changing F32 tensor values; the load's status.
Status load_edited(const GgufFile& src, const std::vector<std::pair<std::string, GgufValue>>& keys,
                   const std::function<void(const std::string&, std::vector<float>&)>& edit,
                   std::unique_ptr<Model>* out = nullptr) {
  GgufWriter w;
  for (const auto& [key, value] : src.metadata()) w.set(key, value);
  for (const auto& [key, value] : keys) w.set(key, value);
  for (const GgufTensorInfo& t : src.tensors()) {
    std::vector<float> data(t.elems);
    std::memcpy(data.data(), t.data, t.bytes);
    if (edit) edit(t.name, data);
    std::vector<uint8_t> bytes(data.size() * 4);
    std::memcpy(bytes.data(), data.data(), bytes.size());
    EXPECT_TRUE(w.add_tensor(t.name, GgmlType::kF32, t.dims, bytes).is_ok());
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
