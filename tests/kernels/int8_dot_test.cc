// Every compiled SIMD target of the integer kernels against the scalar
// reference, bit for bit, over sizes, tails and misaligned pointers.
#include "kernels/cpu/int8_dot.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/ref/int8_dot.h"

namespace ork {
namespace {

class EveryTarget : public ::testing::Test {
 protected:
  void TearDown() override { cpu::force_target(-1); }
};

TEST_F(EveryTarget, DotI8MatchesReference) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> byte(-127, 127);
  std::vector<int8_t> w(4096 + 64), a(4096 + 64);
  for (auto& v : w) v = static_cast<int8_t>(byte(rng));
  for (auto& v : a) v = static_cast<int8_t>(byte(rng));
  ASSERT_GT(cpu::compiled_target_count(), 0);
  for (int t = 0; t < cpu::compiled_target_count(); ++t) {
    cpu::force_target(t);
    for (int64_t k : {1, 7, 16, 31, 32, 33, 100, 256, 1000, 4096}) {
      for (int offset : {0, 1, 3}) {
        ASSERT_EQ(cpu::dot_i8(w.data() + offset, a.data() + offset, k),
                  ref::dot_i8(w.data() + offset, a.data() + offset, k))
            << cpu::target_name(t) << " k=" << k << " offset=" << offset;
      }
    }
  }
}

TEST_F(EveryTarget, DotI4MatchesReference) {
  std::mt19937 rng(2);
  std::uniform_int_distribution<int> byte(0, 255), act(-127, 127);
  std::vector<uint8_t> w(2048 + 8);
  std::vector<int8_t> a(4096 + 8);
  for (auto& v : w) v = static_cast<uint8_t>(byte(rng));
  for (auto& v : a) v = static_cast<int8_t>(act(rng));
  // Extremes: every nibble 0 (code -8) and 15 (code 7) with activations at +-127.
  std::vector<uint8_t> w0(512, 0x00), w15(512, 0xFF);
  std::vector<int8_t> amax(1024, 127), amin(1024, -127);
  for (int t = 0; t < cpu::compiled_target_count(); ++t) {
    cpu::force_target(t);
    for (int64_t k : {32, 64, 96, 128, 384, 1024, 4096}) {
      for (int offset : {0, 1, 5}) {
        ASSERT_EQ(cpu::dot_i4(w.data() + offset, a.data() + offset, k), ref::dot_i4(w.data() + offset, a.data() + offset, k))
            << cpu::target_name(t) << " k=" << k << " offset=" << offset;
      }
    }
    EXPECT_EQ(cpu::dot_i4(w0.data(), amin.data(), 1024), ref::dot_i4(w0.data(), amin.data(), 1024)) << cpu::target_name(t);
    EXPECT_EQ(cpu::dot_i4(w15.data(), amax.data(), 1024), 7 * 127 * 1024) << cpu::target_name(t);
  }
}

TEST_F(EveryTarget, GemvRowsMatchesReference) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t k = 160, rows = 7;
  std::vector<uint8_t> data(rows * k);
  for (auto& v : data) v = static_cast<uint8_t>(byte(rng));
  std::vector<int8_t> a(k);
  for (auto& v : a) v = static_cast<int8_t>(byte(rng) - 128 == -128 ? 0 : byte(rng) - 128);
  const std::vector<float> scales = {0.5f, 1.0f, 2.0f, 0.25f, 3.0f, 1.5f, 0.125f};
  for (int t = 0; t < cpu::compiled_target_count(); ++t) {
    cpu::force_target(t);
    for (int bits : {4, 8}) {
      std::vector<float> y(rows, -1.0f);
      cpu::gemv_rows(bits, data.data(), scales.data(), k, a.data(), 0.01f, y.data(), 1, rows);
      EXPECT_EQ(y[0], -1.0f);  // outside [begin, end): untouched
      for (int64_t r = 1; r < rows; ++r) {
        const int32_t dot = bits == 8 ? ref::dot_i8(reinterpret_cast<const int8_t*>(data.data()) + r * k, a.data(), k)
                                      : ref::dot_i4(data.data() + r * k / 2, a.data(), k);
        EXPECT_EQ(y[static_cast<size_t>(r)], scales[static_cast<size_t>(r)] * 0.01f * static_cast<float>(dot))
            << cpu::target_name(t) << " bits " << bits << " row " << r;
      }
    }
  }
}

TEST(ActivationQuantization, RoundsToTheNearestStepAndKeepsTheMax) {
  std::vector<float> x = {0.5f, -1.0f, 0.25f, 0.0f, 1.0f / 254};
  std::vector<int8_t> q(x.size());
  const float s = ref::quantize_activation_int8(x.data(), static_cast<int64_t>(x.size()), q.data());
  EXPECT_FLOAT_EQ(s, 1.0f / 127);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[0], 64);  // 63.5 rounds to even
  EXPECT_EQ(q[3], 0);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(q[i] * s, x[i], s / 2 + 1e-7f);
  std::vector<float> zeros(8, 0.0f);
  std::vector<int8_t> qz(8, 5);
  EXPECT_EQ(ref::quantize_activation_int8(zeros.data(), 8, qz.data()), 0.0f);
  for (int8_t v : qz) EXPECT_EQ(v, 0);
}

}  // namespace
}  // namespace ork
