// Every GGUF type ork dequantizes, checked bit for bit against the tensors
// llama.cpp dequantized from the same files (fixtures/quant/).
#include "format/gguf/dequant.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/half.h"
#include "format/gguf/gguf.h"
#include "testdata.h"

namespace ork {
namespace {

struct Case {
  const char* file_type;  // as in model-<TYPE>.gguf
  GgmlType tensor_type;
};

class DequantFixture : public ::testing::TestWithParam<Case> {};

std::vector<float> dequantize_tensor(const GgufTensorInfo& t) {
  std::vector<float> out(t.elems);
  const Status s = dequantize(t.type, t.data, out.data(), static_cast<int64_t>(t.elems));
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

TEST_P(DequantFixture, BitExactWithLlamaCpp) {
  const Case c = GetParam();
  const std::string model = std::string("fixtures/quant/model-") + c.file_type + ".gguf";
  ORK_REQUIRE_TESTDATA(model);
  auto gguf = GgufFile::open(testing::testdata(model));
  ASSERT_TRUE(gguf.is_ok()) << gguf.status().to_string();
  for (const char* name : {"blk.0.ffn_down.weight", "blk.0.attn_q.weight"}) {
    const GgufTensorInfo* t = gguf->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, c.tensor_type) << name;
    const std::vector<float> got = dequantize_tensor(*t);
    const std::string ref_file = std::string("fixtures/quant/") + c.file_type + "." + name + ".f32";
    ORK_REQUIRE_TESTDATA(ref_file);
    const std::vector<float> want = testing::read_f32_raw(testing::testdata(ref_file));
    ASSERT_EQ(got.size(), want.size()) << name;
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::memcmp(&got[i], &want[i], 4) != 0 && ++mismatches <= 3) {
        ADD_FAILURE() << name << "[" << i << "]: got " << got[i] << " want " << want[i];
      }
    }
    EXPECT_EQ(mismatches, 0u) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantFixture,
                         ::testing::Values(Case{"Q4_0", GgmlType::kQ4_0}, Case{"Q4_1", GgmlType::kQ4_1},
                                           Case{"Q5_0", GgmlType::kQ5_0}, Case{"Q5_1", GgmlType::kQ5_1},
                                           Case{"Q8_0", GgmlType::kQ8_0}, Case{"Q2_K", GgmlType::kQ2_K},
                                           Case{"Q3_K_S", GgmlType::kQ3_K}, Case{"Q4_K_S", GgmlType::kQ4_K},
                                           Case{"Q5_K_S", GgmlType::kQ5_K}, Case{"Q6_K", GgmlType::kQ6_K},
                                           Case{"IQ4_NL", GgmlType::kIQ4_NL}, Case{"IQ4_XS", GgmlType::kIQ4_XS}),
                         [](const auto& param_info) { return std::string(param_info.param.file_type); });

// F16 and BF16 have no dequantized fixture: they are exact widenings, so the
// check is against the f32 model they were made from, within their rounding.
TEST(DequantFixture, HalfTypesMatchF32Source) {
  ORK_REQUIRE_TESTDATA("fixtures/quant/model-f32.gguf");
  auto f32 = GgufFile::open(testing::testdata("fixtures/quant/model-f32.gguf"));
  ASSERT_TRUE(f32.is_ok()) << f32.status().to_string();
  const std::vector<float> src = dequantize_tensor(*f32->find_tensor("blk.0.attn_q.weight"));
  for (const char* type : {"F16", "BF16"}) {
    auto half = GgufFile::open(testing::testdata(std::string("fixtures/quant/model-") + type + ".gguf"));
    ASSERT_TRUE(half.is_ok()) << half.status().to_string();
    const GgufTensorInfo* t = half->find_tensor("blk.0.attn_q.weight");
    ASSERT_NE(t, nullptr);
    const std::vector<float> got = dequantize_tensor(*t);
    for (size_t i = 0; i < got.size(); ++i) {
      // The half value must be the correctly rounded one: re-rounding f32 gives the same bits.
      const uint16_t want = std::string(type) == "F16" ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
      const float want_f = std::string(type) == "F16" ? f16_to_f32(want) : bf16_to_f32(want);
      ASSERT_EQ(got[i], want_f) << type << "[" << i << "] from " << src[i];
    }
  }
}

TEST(Dequant, UnsupportedTypeIsAnError) {
  uint8_t block[66] = {};
  float out[256];
  const Status s = dequantize(GgmlType::kIQ2_XXS, block, out, 256);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("IQ2_XXS"), std::string::npos) << s.message();
}

TEST(Half, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << "f16 bits " << h;
  }
}

TEST(Quantize, Q8AndQ4RoundTripWithinTheirStep) {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.7f) * 0.3f;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    const auto info = *ggml_type_info(static_cast<uint32_t>(type));
    std::vector<uint8_t> q(ggml_row_bytes(info, x.size()));
    ASSERT_TRUE(quantize(type, x.data(), q.data(), 64).is_ok());
    std::vector<float> y(64);
    ASSERT_TRUE(dequantize(type, q.data(), y.data(), 64).is_ok());
    // Q8_0 rounds to within half a step. Q4_0 maps the block's signed
    // extreme to -8, so values of the other sign clip at +7: up to a step off.
    const float tolerance = type == GgmlType::kQ8_0 ? 0.3f / 127 * 0.51f : 0.3f / 8 * 1.01f;
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], tolerance) << i;
  }
}

}  // namespace
}  // namespace ork
