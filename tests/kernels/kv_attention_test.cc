// Attention over a q8_0 KV cache on every compiled SIMD target against
// the scalar reference (the same integer dot products, floats summed in
// another order), and the reference against f32 attention (what the int8
// cache costs in accuracy).
#include "kernels/cpu/kv_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/kv_layout.h"
#include "kernels/cpu/targets.h"
#include "kernels/every_target.h"
#include "kernels/ref/kv_q8.h"
#include "kernels/ref/ops.h"

namespace ork {
namespace {

using KvEveryTarget = testing::EveryTargetTest;
using testing::normal_vector;

// One KV head's caches of n positions, written through the store functions.
struct Head {
  int hd;
  std::vector<float> k, v;  // n x hd
  std::vector<int8_t> kc, vc;
  std::vector<float> ks, vs;
  std::vector<uint16_t> v16;

  Head(int head_dim, int64_t n, uint32_t seed) : hd(head_dim) {
    k = normal_vector(n * hd, seed);
    v = normal_vector(n * hd, seed + 1);
    // A few outlier channels, as keys after RoPE have.
    for (int64_t p = 0; p < n; ++p) k[static_cast<size_t>(p * hd + 3)] *= 8.0f;
    const KvQ8Layout lay(hd, n);
    kc.assign(lay.codes(), 0), vc.assign(lay.codes(), 0);
    ks.assign(lay.scales(), 0.0f), vs.assign(lay.scales(), 0.0f);
    v16.resize(v.size());
    for (int64_t p = 0; p < n; ++p) {
      cpu::store_key_q8(&k[static_cast<size_t>(p * hd)], hd, p, kc.data(), ks.data());
      cpu::store_value_q8(&v[static_cast<size_t>(p * hd)], hd, p, vc.data(), vs.data());
    }
    for (size_t i = 0; i < v.size(); ++i) v16[i] = f32_to_f16(v[i]);
  }
};

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(KvQ8, RowsQuantizeAsQ8_0AndLandWhereTheLayoutSays) {
  const int hd = 64;
  std::vector<float> x = normal_vector(hd, 3);
  x[40] = 0.0f;
  std::fill(x.begin() + 32, x.end(), 0.0f);  // a block of zeros: scale 0, codes 0
  x[5] = -2.5f;
  std::vector<int8_t> c(hd);
  std::vector<float> s(2);
  ref::quantize_q8_row(x.data(), hd, c.data(), s.data());
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[static_cast<size_t>(i)]));
  EXPECT_EQ(s[0], amax / 127.0f);
  EXPECT_EQ(s[1], 0.0f);
  for (int i = 0; i < 32; ++i) {
    EXPECT_LE(std::fabs(s[0] * c[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]), s[0] * 0.5f + 1e-7f) << i;
  }
  for (int i = 32; i < hd; ++i) EXPECT_EQ(c[static_cast<size_t>(i)], 0);
  // Keys in transposed tiles: position 17 is lane 1 of tile 1.
  const KvQ8Layout lay(hd, 40);
  EXPECT_EQ(lay.positions, 48);
  std::vector<int8_t> kc(lay.codes(), 0);
  std::vector<float> ks(lay.scales(), 0.0f);
  ref::store_key_q8(x.data(), hd, 17, kc.data(), ks.data());
  for (int i = 0; i < hd; ++i) {
    EXPECT_EQ(kc[static_cast<size_t>(16 * hd + (i / 4) * 64 + 4 + i % 4)], c[static_cast<size_t>(i)]) << i;
  }
  EXPECT_EQ(ks[static_cast<size_t>(16 * 2 + 0 * 16 + 1)], s[0]);
  EXPECT_EQ(ks[static_cast<size_t>(16 * 2 + 1 * 16 + 1)], s[1]);
}

// Every target against the reference: the same integers, so only the float
// sums' order differs (scores within 1e-5 of their size, outputs 2e-5).
TEST_F(KvEveryTarget, AttentionOverQ8CacheMatchesReference) {
  for (int hd : {64, 128, 96}) {
    for (int64_t n_kv : {1, 5, 16, 17, 64, 129, 300}) {
      const Head head(hd, n_kv, static_cast<uint32_t>(hd + n_kv));
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      for (int group : {1, 2, 3, 4, 8, 5}) {
        const auto q = normal_vector(group * hd, 11);
        for (bool v_q8 : {true, false}) {
          const int8_t* vc = v_q8 ? head.vc.data() : nullptr;
          const int64_t ld = (n_kv + 15) / 16 * 16;
          std::vector<float> scores(static_cast<size_t>(group * ld)), want(static_cast<size_t>(group * hd));
          ref::attention_group_q8(q.data(), group, head.kc.data(), head.ks.data(), vc, head.vs.data(), head.v16.data(),
                                  n_kv, hd, scale, scores.data(), want.data());
          for (int t = 0; t < cpu::compiled_target_count(); ++t) {
            cpu::force_target(t);
            std::vector<float> got_scores(static_cast<size_t>(group * ld)), got(want.size());
            cpu::attention_group_q8(q.data(), group, head.kc.data(), head.ks.data(), vc, head.vs.data(), head.v16.data(),
                                    n_kv, hd, scale, got_scores.data(), got.data());
            EXPECT_LT(max_abs_diff(got, want), 2e-5f) << cpu::target_name(t) << " hd=" << hd << " n_kv=" << n_kv
                                                      << " group=" << group << " v_q8=" << v_q8;
            for (int g = 0; g < group; ++g) {  // the probabilities
              for (int64_t p = 0; p < n_kv; ++p) {
                ASSERT_NEAR(got_scores[static_cast<size_t>(g * ld + p)], scores[static_cast<size_t>(g * ld + p)], 1e-6f)
                    << cpu::target_name(t) << " hd=" << hd << " n_kv=" << n_kv << " group=" << group << " head " << g
                    << " position " << p;
              }
            }
          }
        }
      }
    }
  }
}

// What the int8 cache costs: its attention against f32 attention over the
// unquantized keys and values - small, and not zero.
TEST(KvQ8, CloseToF32Attention) {
  const int hd = 128;
  const int64_t n_kv = 200;
  const Head head(hd, n_kv, 5);
  const auto q = normal_vector(hd, 6);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> scores(static_cast<size_t>(n_kv + 16)), want(static_cast<size_t>(hd)), got(want.size());
  ref::attention_head(q.data(), head.k.data(), head.v.data(), n_kv, hd, hd, scale, scores.data(), want.data());
  ref::attention_group_q8(q.data(), 1, head.kc.data(), head.ks.data(), head.vc.data(), head.vs.data(), nullptr, n_kv, hd,
                          scale, scores.data(), got.data());
  const float err = max_abs_diff(got, want);
  EXPECT_GT(err, 0.0f);
  EXPECT_LT(err, 0.03f);
}

}  // namespace
}  // namespace ork
