// A hybrid GGUF whose layer pattern, convolution width, head counts,
// DeltaNet shape or expert keys disagree with its tensors is refused at
// load, and the error names the key or the tensor (DESIGN: nothing runs as
// a model it is not). Each case edits the lfm2moe or qwen35 fixture
// (testdata/hybrid) in memory.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "format/gguf/gguf_writer.h"
#include "model/model.h"
#include "testdata.h"

namespace ork {
namespace {

constexpr const char* kFixture = "hybrid/lfm2moe-f32.gguf";

GgufValue int_array(const std::vector<int64_t>& v) {
  GgufValue a;
  a.type = GgufValueType::kArray;
  a.elem_type = GgufValueType::kInt32;
  a.ints = v;
  return a;
}

// The fixture with `keys` set (or removed, when the value is null) and
// `reshape` able to change a tensor's dims (its values cut or padded).
using Reshape = std::function<void(const std::string& name, std::vector<uint64_t>& dims)>;
Status load_edited(const std::vector<std::pair<std::string, std::optional<GgufValue>>>& keys,
                   const Reshape& reshape = nullptr, const char* fixture = kFixture) {
  auto src = GgufFile::open(testing::testdata(fixture));
  if (!src.is_ok()) return src.status();
  GgufWriter w;
  for (const auto& [key, value] : src->metadata()) w.set(key, value);
  for (const auto& [key, value] : keys) {
    if (value) {
      w.set(key, *value);
    } else {
      w.erase(key);
    }
  }
  for (const GgufTensorInfo& t : src->tensors()) {
    std::vector<uint64_t> dims = t.dims;
    if (reshape) reshape(t.name, dims);
    uint64_t elems = 1;
    for (uint64_t d : dims) elems *= d;
    std::vector<uint8_t> bytes(elems * 4, 0);
    std::memcpy(bytes.data(), t.data, std::min<uint64_t>(bytes.size(), t.bytes));
    ORK_RETURN_IF_ERROR(w.add_tensor(t.name, GgmlType::kF32, dims, bytes));
  }
  ORK_ASSIGN_OR_RETURN(auto bytes, w.write_memory());
  ORK_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::parse(MappedFile::from_bytes(bytes, "edited.gguf")));
  return Model::load(std::move(gguf)).status();
}

void expect_refused(const Status& s, const std::string& names) {
  ASSERT_FALSE(s.is_ok()) << "loaded; expected an error naming " << names;
  EXPECT_NE(s.message().find(names), std::string::npos) << "expected " << names << " in: " << s.message();
}

TEST(HybridChecks, TheFixtureLoads) {
  ORK_REQUIRE_TESTDATA(kFixture);
  EXPECT_TRUE(load_edited({}).is_ok());
}

TEST(HybridChecks, PerLayerKvHeadsMustFitTheLayers) {
  ORK_REQUIRE_TESTDATA(kFixture);
  const std::string key = "lfm2moe.attention.head_count_kv";
  expect_refused(load_edited({{key, int_array({0, 0, 2})}}), key);        // 3 entries, 4 layers
  expect_refused(load_edited({{key, int_array({0, 0, 5, 0})}}), key);     // more than head_count
  expect_refused(load_edited({{key, int_array({0, 0, -1, 0})}}), key);    // negative
  expect_refused(load_edited({{key, int_array({0, 0, 0, 0})}}), key);     // no attention layer
  expect_refused(load_edited({{key, int_array({0, 1, 2, 0})}}), key);     // two counts
  // A layer the pattern calls attention has convolution tensors.
  expect_refused(load_edited({{key, int_array({0, 2, 2, 0})}}), "blk.1.attn_q.weight");
  // A layer it calls a convolution has attention tensors.
  expect_refused(load_edited({{key, int_array({0, 0, 0, 2})}}), "blk.2.shortconv.in_proj.weight");
  // head_count 4 is not a multiple of 3.
  expect_refused(load_edited({{key, int_array({0, 0, 3, 0})}}), "head_count_kv 3");
}

TEST(HybridChecks, ConvolutionWidthMustMatchItsKernel) {
  ORK_REQUIRE_TESTDATA(kFixture);
  const std::string key = "lfm2moe.shortconv.l_cache";
  expect_refused(load_edited({{key, std::nullopt}}), key);
  expect_refused(load_edited({{key, GgufValue::make_uint32(1)}}), key);
  expect_refused(load_edited({{key, GgufValue::make_uint32(1000)}}), key);
  expect_refused(load_edited({{key, GgufValue::make_uint32(4)}}), "blk.0.shortconv.conv.weight");
  expect_refused(load_edited({}, [](const std::string& name, std::vector<uint64_t>& dims) {
                   if (name == "blk.3.shortconv.in_proj.weight") dims[1] = 512;
                 }),
                 "blk.3.shortconv.in_proj.weight");
  expect_refused(load_edited({}, [](const std::string& name, std::vector<uint64_t>& dims) {
                   if (name == "blk.1.shortconv.out_proj.weight") dims[0] = 128;
                 }),
                 "blk.1.shortconv.out_proj.weight");
}

TEST(HybridChecks, ExpertKeysMustMatchTheTensors) {
  ORK_REQUIRE_TESTDATA(kFixture);
  const std::string dense = "lfm2moe.leading_dense_block_count";
  expect_refused(load_edited({{dense, GgufValue::make_uint32(4)}}), dense);
  expect_refused(load_edited({{dense, GgufValue::make_uint32(3)}}), "blk.2.ffn_gate.weight");
  expect_refused(load_edited({{dense, GgufValue::make_uint32(1)}}), "blk.1.ffn_gate_inp.weight");
  const std::string gating = "lfm2moe.expert_gating_func";
  expect_refused(load_edited({{gating, GgufValue::make_uint32(3)}}), gating);
  expect_refused(load_edited({}, [](const std::string& name, std::vector<uint64_t>& dims) {
                   if (name == "blk.2.exp_probs_b.bias") dims[0] = 7;
                 }),
                 "blk.2.exp_probs_b.bias");
}

// qwen35: the DeltaNet keys against its tensors.
TEST(HybridChecks, DeltaNetKeysMustMatchTheTensors) {
  constexpr const char* kQwen = "hybrid/qwen35-f32.gguf";
  ORK_REQUIRE_TESTDATA(kQwen);
  auto edited = [&](const std::string& key, std::optional<GgufValue> v) {
    return load_edited({{key, std::move(v)}}, nullptr, kQwen);
  };
  EXPECT_TRUE(load_edited({}, nullptr, kQwen).is_ok());
  const std::string p = "qwen35.";
  expect_refused(edited(p + "full_attention_interval", std::nullopt), p + "full_attention_interval");
  expect_refused(edited(p + "full_attention_interval", GgufValue::make_uint32(0)), p + "full_attention_interval");
  expect_refused(edited(p + "full_attention_interval", GgufValue::make_uint32(9)), p + "full_attention_interval");
  // Interval 2: layer 1 would attend, but it holds DeltaNet tensors.
  expect_refused(edited(p + "full_attention_interval", GgufValue::make_uint32(2)), "blk.1.attn_q.weight");
  expect_refused(edited(p + "ssm.conv_kernel", GgufValue::make_uint32(3)), "blk.0.ssm_conv1d.weight");
  expect_refused(edited(p + "ssm.conv_kernel", GgufValue::make_uint32(1)), p + "ssm.conv_kernel");
  expect_refused(edited(p + "ssm.state_size", GgufValue::make_uint32(32)), "blk.0.attn_qkv.weight");
  expect_refused(edited(p + "ssm.group_count", GgufValue::make_uint32(3)), p + "ssm.group_count");
  expect_refused(edited(p + "ssm.time_step_rank", GgufValue::make_uint32(8)), "blk.0.ssm_beta.weight");
  expect_refused(edited(p + "ssm.inner_size", GgufValue::make_uint32(250)), p + "ssm.inner_size");
  expect_refused(edited(p + "ssm.inner_size", std::nullopt), p + "ssm.inner_size");
  expect_refused(load_edited({}, [](const std::string& name, std::vector<uint64_t>& dims) {
                   if (name == "blk.3.attn_q.weight") dims[1] = 256;  // no room for the gate
                 }, kQwen),
                 "blk.3.attn_q.weight");
  expect_refused(load_edited({}, [](const std::string& name, std::vector<uint64_t>& dims) {
                   if (name == "blk.2.ssm_a") dims[0] = 2;
                 }, kQwen),
                 "blk.2.ssm_a");
}

TEST(HybridChecks, PerLayerKvHeadsBelongToHybridArchitecturesOnly) {
  ORK_REQUIRE_TESTDATA("models/stories260K-f32.gguf");
  auto src = GgufFile::open(testing::testdata("models/stories260K-f32.gguf"));
  ASSERT_TRUE(src.is_ok());
  GgufWriter w;
  for (const auto& [key, value] : src->metadata()) w.set(key, value);
  const int64_t layers = *src->get_int("llama.block_count");
  w.set("llama.attention.head_count_kv", int_array(std::vector<int64_t>(static_cast<size_t>(layers), 0)));
  for (const GgufTensorInfo& t : src->tensors()) {
    ASSERT_TRUE(w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.bytes)).is_ok());
  }
  auto gguf = GgufFile::parse(MappedFile::from_bytes(*w.write_memory(), "edited.gguf"));
  ASSERT_TRUE(gguf.is_ok());
  expect_refused(Model::load(std::move(*gguf)).status(), "llama.attention.head_count_kv");
}

}  // namespace
}  // namespace ork
