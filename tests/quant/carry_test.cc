// Carrying a GGUF quant into q4k / q5k / q6k / q80 keeps every weight: the carried
// rows dequantize bit for bit to what llama.cpp dequantized from the same
// files (fixtures/quant/), and the kernels' view of them (the embedding
// lookup) is the same floats.
#include "quant/carry.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "format/gguf/gguf.h"
#include "kernels/ref/quant_matmul.h"
#include "testdata.h"

namespace ork {
namespace {

struct Case {
  const char* file_type;
  Tier tier;
};

class CarryFixture : public ::testing::TestWithParam<Case> {};

TEST_P(CarryFixture, CarriedRowsAreLlamaCppsWeightsBitForBit) {
  const Case c = GetParam();
  const std::string model = std::string("fixtures/quant/model-") + c.file_type + ".gguf";
  ORK_REQUIRE_TESTDATA(model);
  auto gguf = GgufFile::open(testing::testdata(model));
  ASSERT_TRUE(gguf.is_ok()) << gguf.status().to_string();
  for (const char* name : {"blk.0.ffn_down.weight", "blk.0.attn_q.weight"}) {
    const GgufTensorInfo* t = gguf->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    const auto k = static_cast<int64_t>(t->ne(0));
    const auto rows = static_cast<int64_t>(t->rows());
    ASSERT_EQ(carrier_tier(t->type, k), c.tier) << name;
    std::vector<uint8_t> data(tier_data_bytes(c.tier, rows, k));
    std::vector<float> scales(static_cast<size_t>(rows));
    ASSERT_TRUE(carry_rows(t->type, t->data, rows, k, data.data(), scales.data()).is_ok());
    const std::string ref_file = std::string("fixtures/quant/") + c.file_type + "." + name + ".f32";
    ORK_REQUIRE_TESTDATA(ref_file);
    const std::vector<float> want = testing::read_f32_raw(testing::testdata(ref_file));
    ASSERT_EQ(want.size(), static_cast<size_t>(rows * k));
    const TierTensor tt{c.tier, data.data(), scales.data(), rows, k};
    const QuantWeights w = quant_weights(tt);
    std::vector<float> row(static_cast<size_t>(k)), looked_up(row.size());
    size_t mismatches = 0;
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_tier_row(tt, r, row.data());
      ref::dequantize_codes_row(w, r, looked_up.data());
      ASSERT_EQ(std::memcmp(row.data(), looked_up.data(), row.size() * 4), 0) << name << " row " << r;
      for (int64_t j = 0; j < k; ++j) {
        if (std::memcmp(&row[static_cast<size_t>(j)], &want[static_cast<size_t>(r * k + j)], 4) != 0 && ++mismatches <= 3) {
          ADD_FAILURE() << name << " [" << r << ", " << j << "]: carried " << row[static_cast<size_t>(j)] << ", llama.cpp "
                        << want[static_cast<size_t>(r * k + j)];
        }
      }
    }
    EXPECT_EQ(mismatches, 0u) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(KQuants, CarryFixture,
                         ::testing::Values(Case{"Q2_K", Tier::kQ2k}, Case{"Q3_K_S", Tier::kQ3k}, Case{"Q4_K_S", Tier::kQ4k}, Case{"Q5_K_S", Tier::kQ5k},
                                           Case{"Q6_K", Tier::kQ6k}, Case{"Q8_0", Tier::kQ80}, Case{"Q4_0", Tier::kQ40},
                                           Case{"Q4_1", Tier::kQ41}, Case{"Q5_0", Tier::kQ50}, Case{"Q5_1", Tier::kQ51},
                                           Case{"IQ4_NL", Tier::kIq4nl}, Case{"IQ4_XS", Tier::kIq4xs}),
                         [](const auto& param_info) { return std::string(param_info.param.file_type); });

TEST(Carry, OnlyWholeBlocksOfCarriedTypes) {
  EXPECT_EQ(carrier_tier(GgmlType::kQ4_K, 512), Tier::kQ4k);
  EXPECT_EQ(carrier_tier(GgmlType::kQ6_K, 256), Tier::kQ6k);
  EXPECT_EQ(carrier_tier(GgmlType::kQ5_K, 768), Tier::kQ5k);
  EXPECT_EQ(carrier_tier(GgmlType::kQ8_0, 96), Tier::kQ80);
  EXPECT_FALSE(carrier_tier(GgmlType::kQ8_0, 100).has_value());
  EXPECT_FALSE(carrier_tier(GgmlType::kQ4_K, 288).has_value());
  EXPECT_EQ(carrier_tier(GgmlType::kQ4_0, 96), Tier::kQ40);
  EXPECT_EQ(carrier_tier(GgmlType::kIQ4_NL, 32), Tier::kIq4nl);
  EXPECT_EQ(carrier_tier(GgmlType::kQ2_K, 512), Tier::kQ2k);
  EXPECT_EQ(carrier_tier(GgmlType::kIQ4_XS, 512), Tier::kIq4xs);
  EXPECT_EQ(carrier_tier(GgmlType::kQ3_K, 512), Tier::kQ3k);
  EXPECT_FALSE(carrier_tier(GgmlType::kQ3_K, 384).has_value());
  EXPECT_FALSE(carrier_tier(GgmlType::kF16, 512).has_value());
  std::vector<uint8_t> src(144), data(1024);
  float scale = 0;
  const Status st = carry_rows(GgmlType::kTQ1_0, src.data(), 1, 256, data.data(), &scale);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace ork
