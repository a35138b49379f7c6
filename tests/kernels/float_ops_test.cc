// Every compiled SIMD target of the float kernels against the scalar
// references. The rotation is bit-exact (same butterflies); the others sum
// in a different order (f32 vector accumulators vs the reference's double)
// or use a polynomial exp, so they are held to stated relative bounds.
#include "kernels/cpu/float_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/cpu/targets.h"
#include "kernels/every_target.h"
#include "kernels/ref/ops.h"
#include "quant/rotation.h"

namespace ork {
namespace {

using FloatEveryTarget = testing::EveryTargetTest;
using testing::normal_vector;

// v's values `offset` elements into a buffer of their own: with offset 1
// no vector load or store through p is aligned.
template <class T>
struct Shifted {
  std::vector<T> buf;
  int offset;
  T* p;
  Shifted(const std::vector<T>& v, int off) : buf(v.size() + static_cast<size_t>(off)), offset(off) {
    std::copy(v.begin(), v.end(), buf.begin() + off);
    p = buf.data() + off;
  }
  std::vector<T> values() const { return std::vector<T>(buf.begin() + offset, buf.end()); }
};

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST_F(FloatEveryTarget, RotateIsBitExactWithTheReference) {
  for (auto [k, block] : {std::pair<int64_t, int>{32, 32}, {96, 32}, {2048, 2048}, {4096 * 2, 4096}, {64, 4}, {8, 8},
                          {16, 16}, {64, 64}, {128, 128}, {512, 512}, {1024, 1024}, {768, 256}}) {
    const auto x = normal_vector(k, 7);
    std::vector<float> want = x;
    rotate(want.data(), k, block, kDefaultRotationSeed);
    std::vector<float> signs(static_cast<size_t>(k));
    rotation_signs(k, kDefaultRotationSeed, signs.data());
    for (int t = 0; t < cpu::compiled_target_count(); ++t) {
      cpu::force_target(t);
      for (int off : {0, 1}) {
        Shifted<float> got(x, off);
        cpu::rotate(got.p, k, block, signs.data());
        ASSERT_EQ(got.values(), want) << cpu::target_name(t) << " k=" << k << " block=" << block << " off=" << off;
      }
    }
  }
}

// f32, f16 and bf16 weights; the reference accumulates in double. Bound: a
// relative 1e-5 of sum |w x| (f32 rounding over k <= 4096 terms in 8+
// chains), the same for f16 and bf16 since the reference reads the identical
// narrowed values.
TEST_F(FloatEveryTarget, FloatMatmulMatchesReference) {
  using cpu::FloatWeights;
  for (int64_t k : {7, 32, 100, 1024}) {
    const int64_t rows = 11;
    const int n = 3;
    const auto wf = normal_vector(rows * k, 1);
    std::vector<uint16_t> wh(wf.size()), wb(wf.size());
    std::vector<float> wh_f32(wf.size()), wb_f32(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) {
      wh[i] = f32_to_f16(wf[i]);
      wh_f32[i] = f16_to_f32(wh[i]);
      wb[i] = f32_to_bf16(wf[i]);
      wb_f32[i] = bf16_to_f32(wb[i]);
    }
    const auto x = normal_vector(n * k, 2);
    for (FloatWeights kind : {FloatWeights::kF32, FloatWeights::kF16, FloatWeights::kBf16}) {
      const std::vector<float>& wref = kind == FloatWeights::kF16 ? wh_f32 : kind == FloatWeights::kBf16 ? wb_f32 : wf;
      std::vector<double> want(static_cast<size_t>(n * rows)), mag(want.size());
      for (int t = 0; t < n; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < k; ++j) {
            const double p = static_cast<double>(wref[static_cast<size_t>(r * k + j)]) * x[static_cast<size_t>(t * k + j)];
            want[static_cast<size_t>(t * rows + r)] += p;
            mag[static_cast<size_t>(t * rows + r)] += std::fabs(p);
          }
        }
      }
      for (int tg = 0; tg < cpu::compiled_target_count(); ++tg) {
        cpu::force_target(tg);
        for (int off : {0, 1}) {
          const Shifted<uint16_t> wh_s(kind == FloatWeights::kBf16 ? wb : wh, off);
          const Shifted<float> wf_s(wf, off), x_s(x, off);
          std::vector<float> y(want.size(), -1.0f);
          const void* w = kind == FloatWeights::kF32 ? static_cast<const void*>(wf_s.p) : wh_s.p;
          cpu::float_matmul(kind, w, k, x_s.p, n, y.data(), rows, 1, rows);
          for (int t = 0; t < n; ++t) {
            EXPECT_EQ(y[static_cast<size_t>(t * rows)], -1.0f);  // row 0 is outside the range
            for (int64_t r = 1; r < rows; ++r) {
              const size_t i = static_cast<size_t>(t * rows + r);
              ASSERT_NEAR(y[i], want[i], 1e-5 * mag[i] + 1e-30)
                  << cpu::target_name(tg) << " k=" << k << " kind=" << static_cast<int>(kind) << " off=" << off;
            }
          }
        }
      }
    }
  }
}

// A matrix whose values are all bf16 (or f16) gives the same bits stored
// narrow as stored f32: what lets the packer keep bf16-valued MoE routers
// in half the bytes without changing a routing decision.
TEST_F(FloatEveryTarget, NarrowWeightsGiveTheWideMatrixBits) {
  using cpu::FloatWeights;
  const int64_t rows = 9, k = 2048;
  const int n = 2;
  const auto w = normal_vector(rows * k, 3, 0.02f);
  const auto x = normal_vector(n * k, 4);
  for (FloatWeights kind : {FloatWeights::kF16, FloatWeights::kBf16}) {
    std::vector<uint16_t> narrow(w.size());
    std::vector<float> wide(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      narrow[i] = kind == FloatWeights::kF16 ? f32_to_f16(w[i]) : f32_to_bf16(w[i]);
      wide[i] = kind == FloatWeights::kF16 ? f16_to_f32(narrow[i]) : bf16_to_f32(narrow[i]);
    }
    for (int tg = 0; tg < cpu::compiled_target_count(); ++tg) {
      cpu::force_target(tg);
      std::vector<float> from_narrow(static_cast<size_t>(n * rows)), from_wide(from_narrow.size());
      cpu::float_matmul(kind, narrow.data(), k, x.data(), n, from_narrow.data(), rows, 0, rows);
      cpu::float_matmul(FloatWeights::kF32, wide.data(), k, x.data(), n, from_wide.data(), rows, 0, rows);
      EXPECT_EQ(from_narrow, from_wide) << cpu::target_name(tg) << " kind=" << static_cast<int>(kind);
    }
  }
}

// Several tokens take the rows in blocks that stay in L2, a token alone the
// whole range at once: the same sums in the same order, so the same bits -
// over a range that starts and ends inside a block and spans several (f32
// rows of 1,024: blocks of 32; f16: 64).
TEST_F(FloatEveryTarget, RowBlocksOfABatchGiveEachTokensBits) {
  using cpu::FloatWeights;
  const int64_t rows = 301, k = 1024, begin = 3, end = 299;
  const int n = 5;
  const auto wf = normal_vector(rows * k, 7, 0.02f);
  std::vector<uint16_t> wh(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) wh[i] = f32_to_f16(wf[i]);
  const auto x = normal_vector(n * k, 8);
  for (FloatWeights kind : {FloatWeights::kF32, FloatWeights::kF16}) {
    const void* w = kind == FloatWeights::kF32 ? static_cast<const void*>(wf.data()) : wh.data();
    for (int tg = 0; tg < cpu::compiled_target_count(); ++tg) {
      cpu::force_target(tg);
      std::vector<float> batch(static_cast<size_t>(n * rows), -1.0f), alone(batch.size(), -1.0f);
      cpu::float_matmul(kind, w, k, x.data(), n, batch.data(), rows, begin, end);
      for (int t = 0; t < n; ++t) {
        cpu::float_matmul(kind, w, k, x.data() + t * k, 1, alone.data() + t * rows, rows, begin, end);
      }
      EXPECT_EQ(batch, alone) << cpu::target_name(tg) << " kind=" << static_cast<int>(kind);
    }
  }
}

TEST_F(FloatEveryTarget, RmsNormSwigluRopeMatchReference) {
  for (int64_t n : {1, 9, 64, 2048, 2051}) {
    const auto x = normal_vector(n, 3, 2.0f), w = normal_vector(n, 4), up = normal_vector(n, 5);
    std::vector<float> want_norm(static_cast<size_t>(n)), want_glu(want_norm.size());
    ref::rms_norm(x.data(), w.data(), n, 1e-5f, want_norm.data());
    ref::swiglu(x.data(), up.data(), n, want_glu.data());
    for (int t = 0; t < cpu::compiled_target_count(); ++t) {
      cpu::force_target(t);
      for (int off : {0, 1}) {
        const Shifted<float> xs(x, off), ws(w, off), ups(up, off);
        Shifted<float> got(want_norm, off);
        cpu::rms_norm(xs.p, ws.p, n, 1e-5f, got.p);
        // The scale differs by the f32 sum of squares' rounding: ~1e-6 relative.
        for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got.p[i], want_norm[i], 2e-6f * std::fabs(want_norm[i]) + 1e-30f);
        cpu::swiglu(xs.p, ups.p, n, got.p);
        // Highway's exp is within a few ulp.
        for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got.p[i], want_glu[i], 1e-6f * std::fabs(want_glu[i]) + 1e-7f);
      }
    }
  }
  // RoPE from a table equals the reference rope, both layouts, bit for bit.
  const int head_dim = 64;
  for (auto type : {RopeType::kNorm, RopeType::kNeox}) {
    for (int n_rot : {64, 32}) {
      const RopeParams p{type, n_rot, 10000.0f, 1.0f, nullptr};
      std::vector<float> cos(n_rot / 2), sin(n_rot / 2);
      ref::rope_table(123, p, cos.data(), sin.data());
      const auto x = normal_vector(head_dim, 6);
      std::vector<float> want = x;
      ref::rope(want.data(), head_dim, 123, p);
      for (int t = 0; t < cpu::compiled_target_count(); ++t) {
        cpu::force_target(t);
        std::vector<float> got = x;
        cpu::rope(got.data(), n_rot, type == RopeType::kNorm, cos.data(), sin.data());
        ASSERT_EQ(got, want) << cpu::target_name(t) << " n_rot=" << n_rot;
      }
    }
  }
}

// GeGLU (GELU's tanh form, as llama.cpp) against the double-precision
// reference, and softmax against the reference, over lengths with tails.
TEST_F(FloatEveryTarget, GegluAndSoftmaxMatchReference) {
  for (int64_t n : {1, 7, 8, 9, 64, 1000, 2051}) {
    const auto x = normal_vector(n, 7, 3.0f), up = normal_vector(n, 8);
    std::vector<float> want(static_cast<size_t>(n));
    ref::geglu(x.data(), up.data(), n, want.data());
    std::vector<float> want_soft = x;
    ref::softmax(want_soft.data(), n);
    for (int t = 0; t < cpu::compiled_target_count(); ++t) {
      cpu::force_target(t);
      for (int off : {0, 1}) {
        const Shifted<float> xs(x, off), ups(up, off);
        Shifted<float> got(want, off);
        cpu::geglu(xs.p, ups.p, n, got.p);
        // Highway's tanh is within a few ulp of 1, which 1 + tanh keeps as an
        // absolute error where the gate is very negative.
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_NEAR(got.p[i], want[i], 2e-6f * std::fabs(want[i]) + 2e-7f * (1.0f + std::fabs(x[i])) * std::fabs(up[i]))
              << cpu::target_name(t) << " n=" << n << " i=" << i << " gate=" << x[i] << " off=" << off;
        }
        Shifted<float> soft(x, off);
        cpu::softmax(soft.p, n);
        float sum = 0.0f;
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_NEAR(soft.p[i], want_soft[i], 2e-6f * want_soft[i] + 1e-12f)
              << cpu::target_name(t) << " n=" << n << " off=" << off;
          sum += soft.p[i];
        }
        EXPECT_NEAR(sum, 1.0f, 1e-5f);
      }
    }
  }
  // GELU's shape: about g for large g, about 0 for very negative g, 0 at 0.
  const std::vector<float> g = {-10.0f, 0.0f, 10.0f}, one(3, 1.0f);
  std::vector<float> out(3);
  cpu::geglu(g.data(), one.data(), 3, out.data());
  EXPECT_NEAR(out[0], 0.0f, 1e-6f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_NEAR(out[2], 10.0f, 1e-5f);
}

// Attention over an f16 cache against the f32 reference reading the same
// (rounded) values: softmax weights within 1e-6, outputs a mean of v rows.
TEST_F(FloatEveryTarget, AttentionOverF16CacheMatchesReference) {
  for (int head_dim : {64, 128, 36}) {
    for (int64_t n_kv : {1, 5, 17, 64, 129, 300}) {
      const int64_t stride = head_dim * 2 + 3;
      const auto q = normal_vector(head_dim, 8), kf = normal_vector(n_kv * stride, 9), vf = normal_vector(n_kv * stride, 10);
      std::vector<uint16_t> kh(kf.size()), vh(vf.size());
      cpu::force_target(-1);
      cpu::to_f16(kf.data(), static_cast<int64_t>(kf.size()), kh.data());
      cpu::to_f16(vf.data(), static_cast<int64_t>(vf.size()), vh.data());
      std::vector<float> kr(kf.size()), vr(vf.size());
      for (size_t i = 0; i < kf.size(); ++i) {
        ASSERT_EQ(kh[i], f32_to_f16(kf[i]));  // round to nearest even, as the scalar conversion
        kr[i] = f16_to_f32(kh[i]);
        vr[i] = f16_to_f32(vh[i]);
      }
      std::vector<float> scores(static_cast<size_t>(n_kv)), want(static_cast<size_t>(head_dim));
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      ref::attention_head(q.data(), kr.data(), vr.data(), n_kv, head_dim, stride, scale, scores.data(), want.data());
      for (int t = 0; t < cpu::compiled_target_count(); ++t) {
        cpu::force_target(t);
        std::vector<float> got(want.size());
        cpu::attention_head_f16(q.data(), kh.data(), vh.data(), n_kv, head_dim, stride, scale, scores.data(), got.data());
        EXPECT_LT(max_abs_diff(got, want), 2e-6f) << cpu::target_name(t) << " head_dim=" << head_dim << " n_kv=" << n_kv;
        // A group of query heads over the same KV head: each head's output
        // is the one-head kernel's, bit for bit.
        for (int group : {1, 2, 3, 4, 8}) {
          std::vector<float> qs(static_cast<size_t>(group * head_dim)), outs(qs.size()), one(static_cast<size_t>(head_dim));
          for (size_t i = 0; i < qs.size(); ++i) qs[i] = q[i % static_cast<size_t>(head_dim)] * (1.0f + 0.1f * static_cast<float>(i / static_cast<size_t>(head_dim)));
          std::vector<float> group_scores(static_cast<size_t>(group * n_kv));
          cpu::attention_group_f16(qs.data(), group, kh.data(), vh.data(), n_kv, head_dim, stride, scale, group_scores.data(),
                                   outs.data());
          for (int g = 0; g < group; ++g) {
            cpu::attention_head_f16(&qs[static_cast<size_t>(g * head_dim)], kh.data(), vh.data(), n_kv, head_dim, stride, scale,
                                    scores.data(), one.data());
            EXPECT_TRUE(std::equal(one.begin(), one.end(), outs.begin() + g * head_dim))
                << cpu::target_name(t) << " group " << group << " head " << g << " head_dim=" << head_dim << " n_kv=" << n_kv;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ork

namespace ork {
namespace {

TEST_F(FloatEveryTarget, StreamReadSumsEveryWord) {
  std::vector<uint64_t> words(1000 + 3);
  uint64_t want = 0;
  for (size_t i = 0; i < words.size(); ++i) {
    words[i] = i * 0x9E3779B97F4A7C15ull;
  }
  for (size_t i = 1; i < words.size(); ++i) want += words[i];
  for (int t = 0; t < cpu::compiled_target_count(); ++t) {
    cpu::force_target(t);
    // Every way of splitting the words, and sizes that leave a tail in
    // each part and in none.
    for (int streams : {1, 2, 4, 3}) {
      EXPECT_EQ(cpu::stream_read(words.data() + 1, static_cast<int64_t>(words.size()) - 1, streams), want)
          << cpu::target_name(t) << ", " << streams << " streams";
      uint64_t first = 0;
      for (size_t i = 0; i < 64; ++i) first += words[i];
      EXPECT_EQ(cpu::stream_read(words.data(), 64, streams), first) << cpu::target_name(t) << ", " << streams;
      EXPECT_EQ(cpu::stream_read(words.data(), 3, streams), words[0] + words[1] + words[2]) << cpu::target_name(t);
    }
  }
}

}  // namespace
}  // namespace ork
