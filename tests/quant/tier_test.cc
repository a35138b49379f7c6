// Every tier's quantizer against its reference dequantizer, on Gaussian,
// heavy-tailed and outlier-column matrices; the split tier's two readings;
// the rotation's orthogonality.
#include "quant/tier.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"
#include "quant/planes.h"
#include "quant/rotation.h"
#include "quant/scale_search.h"
#include "quant/test_matrices.h"

namespace ork {
namespace {

struct Quantized {
  std::vector<uint8_t> data;
  std::vector<float> scales;
  std::vector<float> recon;
  double reported_error = 0;
};

Quantized run(Tier tier, const std::vector<float>& w, int64_t rows, int64_t k, const float* imp = nullptr) {
  Quantized q;
  q.data.resize(tier_data_bytes(tier, rows, k));
  q.scales.resize(static_cast<size_t>(rows));
  q.reported_error = quantize_tier(tier, w.data(), imp, rows, k, q.data.data(), q.scales.data());
  q.recon.resize(w.size());
  const TierTensor t{tier, q.data.data(), tier_info(tier).has_scales ? q.scales.data() : nullptr, rows, k};
  for (int64_t r = 0; r < rows; ++r) dequantize_tier_row(t, r, &q.recon[static_cast<size_t>(r * k)]);
  return q;
}


// Relative RMSE bounds on Gaussian rows: a b-bit uniform code with a
// searched scale has step ~ 2*2.8 sigma / 2^b, RMSE ~ step/sqrt(12); the
// bounds sit ~20 % above what the searched scales measure.
struct TierCase {
  Tier tier;
  double max_rel_rmse_gaussian;
};

class TierRoundTrip : public ::testing::TestWithParam<TierCase> {};

TEST_P(TierRoundTrip, ErrorWithinBoundAndReportedExactly) {
  const TierCase c = GetParam();
  for (int64_t k : {32, 96, 256}) {
    const int64_t rows = 16;
    const auto w = make_test_matrix(MatrixKind::kGaussian, rows, k, 1);
    const Quantized q = run(c.tier, w, rows, k);
    EXPECT_LE(relative_rmse(w, q.recon), c.max_rel_rmse_gaussian) << tier_name(c.tier) << " k=" << k;
    double err = 0;
    for (size_t i = 0; i < w.size(); ++i) err += (w[i] - q.recon[i]) * static_cast<double>(w[i] - q.recon[i]);
    EXPECT_NEAR(q.reported_error, err, 1e-6 * (1 + err)) << tier_name(c.tier);
  }
}

INSTANTIATE_TEST_SUITE_P(All, TierRoundTrip,
                         ::testing::Values(TierCase{Tier::kF32, 0.0}, TierCase{Tier::kF16, 5e-4},
                                           TierCase{Tier::kI8, 0.012}, TierCase{Tier::kI6, 0.045},
                                           TierCase{Tier::kI5, 0.09}, TierCase{Tier::kI4, 0.18},
                                           TierCase{Tier::kNf4, 0.16}, TierCase{Tier::kI8s, 0.015},
                                           TierCase{Tier::kBf16, 2.2e-3}),
                         [](const auto& param_info) { return std::string(tier_name(param_info.param.tier)); });

TEST(Tiers, MoreBitsNeverWorseOnAnyMatrix) {
  for (MatrixKind kind : {MatrixKind::kGaussian, MatrixKind::kStudentT4, MatrixKind::kOutlierColumns}) {
    const auto w = make_test_matrix(kind, 32, 256, 2);
    const double e4 = relative_rmse(w, run(Tier::kI4, w, 32, 256).recon);
    const double e5 = relative_rmse(w, run(Tier::kI5, w, 32, 256).recon);
    const double e6 = relative_rmse(w, run(Tier::kI6, w, 32, 256).recon);
    const double e8 = relative_rmse(w, run(Tier::kI8, w, 32, 256).recon);
    EXPECT_LT(e5, e4) << matrix_kind_name(kind);
    EXPECT_LT(e6, e5) << matrix_kind_name(kind);
    EXPECT_LT(e8, e6) << matrix_kind_name(kind);
  }
}

TEST(Tiers, ScaleSearchBeatsAbsmax) {
  const auto w = make_test_matrix(MatrixKind::kStudentT4, 64, 256, 3);
  double searched = 0, absmax = 0;
  const Grid grid = Grid::integers(-8, 7);
  for (int64_t r = 0; r < 64; ++r) {
    const float* row = &w[static_cast<size_t>(r * 256)];
    searched += search_scale(row, nullptr, 256, grid).error;
    float amax = 0;
    for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(row[j]));
    const float s = amax / 8.0f;
    for (int j = 0; j < 256; ++j) {
      const double d = row[j] - s * grid.level(grid.index(row[j] / s));
      absmax += d * d;
    }
  }
  EXPECT_LT(searched, 0.9 * absmax);  // measured: 0.84 on this Student-t matrix
}

// Every scale the search picks in f16's normal range is an f16 value (an
// orkpack then keeps the scales in 2 bytes a row), i8s's included, whose
// least scale it rounds up to; scales outside that range stay f32.
TEST(Tiers, ScaleSearchPicksF16Values) {
  auto is_f16 = [](float s) { return f16_to_f32(f32_to_f16(s)) == s; };
  for (float magnitude : {0.01f, 1.0f, 300.0f}) {
    const auto w = make_test_matrix(MatrixKind::kStudentT4, 16, 256, 5);
    for (int64_t r = 0; r < 16; ++r) {
      std::vector<float> row(w.begin() + r * 256, w.begin() + (r + 1) * 256);
      for (float& v : row) v *= magnitude;
      float amax = 0;
      for (float v : row) amax = std::max(amax, std::fabs(v));
      for (const Grid& grid : {Grid::integers(-8, 7), Grid::integers(-128, 127)}) {
        const ScaleChoice c = search_scale(row.data(), nullptr, 256, grid);
        EXPECT_TRUE(is_f16(c.scale)) << c.scale;
      }
      const float least = amax / 7.4375f;
      const ScaleChoice i8s = search_scale(row.data(), nullptr, 256, Grid::integers(-128, 127), least);
      EXPECT_TRUE(is_f16(i8s.scale)) << i8s.scale;
      EXPECT_GE(i8s.scale, least);
    }
  }
  // Weights so small that the scale is below f16's least normal: f32.
  std::vector<float> tiny(64);
  for (size_t j = 0; j < tiny.size(); ++j) tiny[j] = 1e-7f * static_cast<float>(static_cast<int>(j % 9) - 4);
  const ScaleChoice c = search_scale(tiny.data(), nullptr, 64, Grid::integers(-8, 7));
  EXPECT_GT(c.scale, 0.0f);
  EXPECT_LT(c.scale, 6.1e-5f);
  EXPECT_FALSE(is_f16(c.scale) && c.scale > 6.103515625e-05f);
}

// The codebook's nearest level (Grid::index, branch-free) against a plain
// scan, ties toward the lower level: below, above and between the levels,
// at every level and every midpoint exactly.
TEST(Tiers, CodebookIndexIsTheNearestLevel) {
  const auto& levels = nf4_codebook();
  const Grid grid = Grid::codebook(levels);
  std::vector<float> xs = {-5.0f, -1.0f, 1.0f, 5.0f, 0.0f, -0.0f};
  for (size_t i = 0; i < levels.size(); ++i) {
    xs.push_back(levels[i]);
    if (i + 1 < levels.size()) {
      const float mid = levels[i] + (levels[i + 1] - levels[i]) / 2;
      for (float x : {mid, std::nextafter(mid, -2.0f), std::nextafter(mid, 2.0f)}) xs.push_back(x);
    }
  }
  for (int j = 0; j <= 4000; ++j) xs.push_back(-1.2f + 2.4f * static_cast<float>(j) / 4000);
  for (size_t i = 0; i + 1 < levels.size(); ++i) {  // each bound is where the pair's comparison flips
    const float b = grid.bounds()[i];
    EXPECT_FALSE(Grid::nearer_upper(levels[i], levels[i + 1], b)) << i;
    EXPECT_TRUE(Grid::nearer_upper(levels[i], levels[i + 1], std::nextafter(b, 2.0f))) << i;
    for (float x : {b, std::nextafter(b, 2.0f), std::nextafter(b, -2.0f)}) xs.push_back(x);
  }
  for (float x : xs) {
    int nearest = 0;
    for (int i = 1; i < static_cast<int>(levels.size()); ++i) {
      if (x - levels[static_cast<size_t>(nearest)] > levels[static_cast<size_t>(i)] - x) nearest = i;
    }
    ASSERT_EQ(grid.index(x), nearest) << "x = " << x;
  }
}

// The scale search's error for a codebook (its vectorised loop) is the error
// of the codes it picks, summed plainly.
TEST(Tiers, CodebookSearchReportsItsError) {
  const Grid grid = Grid::codebook(nf4_codebook());
  const auto w = make_test_matrix(MatrixKind::kStudentT4, 16, 300, 5);
  std::vector<float> imp(300);
  for (size_t j = 0; j < imp.size(); ++j) imp[j] = 0.5f + static_cast<float>(j % 7);
  for (const float* weights : std::initializer_list<const float*>{nullptr, imp.data()}) {
    for (int64_t r = 0; r < 16; ++r) {
      const float* row = &w[static_cast<size_t>(r * 300)];
      const ScaleChoice c = search_scale(row, weights, 300, grid);
      double err = 0;
      for (int j = 0; j < 300; ++j) {
        const double d = static_cast<double>(row[j]) - static_cast<double>(c.scale * grid.level(grid.index(row[j] / c.scale)));
        err += (weights != nullptr ? weights[j] : 1.0) * d * d;
      }
      EXPECT_NEAR(c.error, err, 1e-9 * err) << "row " << r;
    }
  }
}

TEST(Tiers, ImportanceShiftsErrorToUnimportantColumns) {
  const int64_t k = 128;
  const auto w = make_test_matrix(MatrixKind::kStudentT4, 32, k, 4);
  std::vector<float> imp(k, 1.0f);
  for (int64_t j = 0; j < 16; ++j) imp[static_cast<size_t>(j)] = 100.0f;
  auto important_error = [&](const Quantized& q) {
    double e = 0;
    for (int64_t r = 0; r < 32; ++r) {
      for (int64_t j = 0; j < 16; ++j) {
        const size_t i = static_cast<size_t>(r * k + j);
        e += (w[i] - q.recon[i]) * static_cast<double>(w[i] - q.recon[i]);
      }
    }
    return e;
  };
  EXPECT_LT(important_error(run(Tier::kI4, w, 32, k, imp.data())), 0.9 * important_error(run(Tier::kI4, w, 32, k)));
}

TEST(Tiers, SplitTierReadsAsI4AndAsInt8) {
  const int64_t rows = 8, k = 64;
  const auto w = make_test_matrix(MatrixKind::kGaussian, rows, k, 5);
  const Quantized q = run(Tier::kI8s, w, rows, k);
  const TierTensor t{Tier::kI8s, q.data.data(), q.scales.data(), rows, k};
  std::vector<float> hi(static_cast<size_t>(k));
  double hi_err = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float s = q.scales[static_cast<size_t>(r)];
    const uint8_t* high = q.data.data() + r * k / 2;
    const uint8_t* low = q.data.data() + rows * k / 2 + r * k / 2;
    dequantize_i8s_high_row(t, r, hi.data());
    for (int64_t j = 0; j < k; ++j) {
      const int h = planes::get_nibble(high, j) - 8;
      const int l = planes::get_nibble(low, j) - 8;
      ASSERT_LE(std::abs(h), 7);                       // a valid i4 code
      ASSERT_FLOAT_EQ(hi[static_cast<size_t>(j)], s * static_cast<float>(h));
      const int code = 16 * h + l;                     // an int8 code with scale s/16
      ASSERT_LE(std::abs(code), 127);
      ASSERT_FLOAT_EQ(q.recon[static_cast<size_t>(r * k + j)], s / 16 * static_cast<float>(code));
      const double d = w[static_cast<size_t>(r * k + j)] - hi[static_cast<size_t>(j)];
      hi_err += d * d;
    }
  }
  // The high plane alone is close to i4 (a 15-level code whose scale may not
  // clip, so about absmax-i4); both planes together are i8-class.
  const double i4 = relative_rmse(w, run(Tier::kI4, w, rows, k).recon);
  double den = 0;
  for (float v : w) den += v * static_cast<double>(v);
  EXPECT_LT(std::sqrt(hi_err / den), 1.4 * i4);
  EXPECT_LT(relative_rmse(w, q.recon), 0.015);
}

TEST(Tiers, AllZeroRowsStayZero) {
  const std::vector<float> w(64, 0.0f);
  for (uint32_t id = 0; id < kTierCount; ++id) {
    const Quantized q = run(*tier_from_id(id), w, 2, 32);
    for (float v : q.recon) EXPECT_EQ(v, 0.0f);
  }
}

TEST(Tiers, NamesRoundTrip) {
  for (uint32_t id = 0; id < kTierCount; ++id) {
    const Tier t = *tier_from_id(id);
    EXPECT_EQ(tier_from_name(tier_name(t)), t);
  }
  EXPECT_FALSE(tier_from_name("i3"));
  EXPECT_FALSE(tier_from_id(kTierCount));
}

TEST(Planes, NibblesAndBitsRoundTrip) {
  std::vector<uint8_t> nib(32), bits1(8), bits2(16);
  for (int64_t e = 0; e < 64; ++e) {
    planes::set_nibble(nib.data(), e, static_cast<uint8_t>((e * 7) & 15));
    planes::set_bits(bits1.data(), e, 1, static_cast<uint8_t>(e % 3 == 0));
    planes::set_bits(bits2.data(), e, 2, static_cast<uint8_t>(e % 4));
  }
  for (int64_t e = 0; e < 64; ++e) {
    EXPECT_EQ(planes::get_nibble(nib.data(), e), (e * 7) & 15);
    EXPECT_EQ(planes::get_bits(bits1.data(), e, 1), e % 3 == 0 ? 1 : 0);
    EXPECT_EQ(planes::get_bits(bits2.data(), e, 2), e % 4);
  }
  // The documented group layout: weight 17 is the high nibble of byte 1.
  std::vector<uint8_t> one(16, 0);
  planes::set_nibble(one.data(), 17, 0xA);
  EXPECT_EQ(one[1], 0xA0);
}

TEST(Rotation, IsOrthogonalAndInvertible) {
  for (int64_t k : {32, 96, 192, 768, 8192}) {
    const int block = rotation_block(k);
    ASSERT_GT(block, 0);
    EXPECT_EQ(k % block, 0);
    const auto a = make_test_matrix(MatrixKind::kOutlierColumns, 1, k, 6);
    const auto b = make_test_matrix(MatrixKind::kGaussian, 1, k, 7);
    auto ra = a, rb = b;
    rotate(ra.data(), k, block, 11);
    rotate(rb.data(), k, block, 11);
    double dot = 0, rdot = 0;
    for (int64_t j = 0; j < k; ++j) {
      dot += a[static_cast<size_t>(j)] * static_cast<double>(b[static_cast<size_t>(j)]);
      rdot += ra[static_cast<size_t>(j)] * static_cast<double>(rb[static_cast<size_t>(j)]);
    }
    EXPECT_NEAR(dot, rdot, 1e-4 * k) << k;
    unrotate(ra.data(), k, block, 11);
    for (int64_t j = 0; j < k; ++j) EXPECT_NEAR(ra[static_cast<size_t>(j)], a[static_cast<size_t>(j)], 1e-4) << k;
  }
  EXPECT_EQ(rotation_block(192), 64);
  EXPECT_EQ(rotation_block(8192), 4096);
}

TEST(Rotation, SpreadsOutlierColumnsSoI4ErrsLess) {
  const int64_t rows = 32, k = 256;
  auto w = make_test_matrix(MatrixKind::kOutlierColumns, rows, k, 8);
  const double plain = relative_rmse(w, run(Tier::kI4, w, rows, k).recon);
  auto rotated = w;
  for (int64_t r = 0; r < rows; ++r) rotate(&rotated[static_cast<size_t>(r * k)], k, rotation_block(k), 9);
  // Error measured in the original space: rotation is orthogonal, so the
  // rotated-space error is the same number.
  const double rot = relative_rmse(rotated, run(Tier::kI4, rotated, rows, k).recon);
  EXPECT_LT(rot, 0.85 * plain);
}

}  // namespace
}  // namespace ork

#include "quant/gptq.h"

namespace ork {
namespace {

// The factor is what GPTQ asks for: R upper with a positive diagonal and
// R R^T = H + damping, damping 1 % of H's mean diagonal, on a correlated H
// of a size that is not a whole number of the factor's panels.
TEST(Gptq, FactorIsTheUpperFactorOfTheDampedHessian) {
  const int64_t k = 37, samples = 300;
  const auto x = make_test_matrix(MatrixKind::kGaussian, samples, k, 21);
  std::vector<double> h(static_cast<size_t>(k * k), 0.0);
  for (int64_t s = 0; s < samples; ++s) {
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        const double xi = x[static_cast<size_t>(s * k + i)] + 0.5 * x[static_cast<size_t>(s * k + (i + 1) % k)];
        const double xj = x[static_cast<size_t>(s * k + j)] + 0.5 * x[static_cast<size_t>(s * k + (j + 1) % k)];
        h[static_cast<size_t>(i * k + j)] += xi * xj / samples;
      }
    }
  }
  const std::vector<double> r = gptq_factor(h, k);
  ASSERT_EQ(r.size(), static_cast<size_t>(k * k));
  double mean_diag = 0;
  for (int64_t i = 0; i < k; ++i) mean_diag += h[static_cast<size_t>(i * k + i)] / k;
  for (int64_t i = 0; i < k; ++i) {
    EXPECT_GT(r[static_cast<size_t>(i * k + i)], 0.0);
    for (int64_t j = 0; j < i; ++j) EXPECT_EQ(r[static_cast<size_t>(i * k + j)], 0.0) << i << "," << j;
  }
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      double v = 0;  // (R R^T)[i][j]
      for (int64_t p = 0; p < k; ++p) v += r[static_cast<size_t>(i * k + p)] * r[static_cast<size_t>(j * k + p)];
      const double want = h[static_cast<size_t>(i * k + j)] + (i == j ? 0.01 * mean_diag : 0.0);
      EXPECT_NEAR(v, want, 1e-12 * mean_diag) << i << "," << j;
    }
  }
}

// GPTQ's rounding through R is the textbook one through U = R^-1, the
// upper Cholesky factor of H^-1: w~_j = w_j - sum_{p<j} U_pj (w~_p - v_p) /
// U_pp, v_j = w~_j rounded. Same codes on a correlated H (the scale
// searched first, as quantize_tier does).
TEST(Gptq, RoundsAsTheInverseFactorWould) {
  const int64_t k = 64, rows = 6;  // k: a stored K, a multiple of 32
  const auto z = make_test_matrix(MatrixKind::kGaussian, 200, k, 31);
  std::vector<double> h(static_cast<size_t>(k * k), 0.0);
  for (int64_t s = 0; s < 200; ++s) {
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        h[static_cast<size_t>(i * k + j)] += (z[static_cast<size_t>(s * k + i)] + z[static_cast<size_t>(s * k + (i + 3) % k)]) *
                                             (z[static_cast<size_t>(s * k + j)] + z[static_cast<size_t>(s * k + (j + 3) % k)]) / 200;
      }
    }
  }
  const std::vector<double> r = gptq_factor(h, k);
  ASSERT_EQ(r.size(), static_cast<size_t>(k * k));
  // U = R^-1 by back substitution, column by column.
  std::vector<double> u(static_cast<size_t>(k * k), 0.0);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t i = c; i >= 0; --i) {
      double s = i == c ? 1.0 : 0.0;
      for (int64_t p = i + 1; p <= c; ++p) s -= r[static_cast<size_t>(i * k + p)] * u[static_cast<size_t>(p * k + c)];
      u[static_cast<size_t>(i * k + c)] = s / r[static_cast<size_t>(i * k + i)];
    }
  }
  const auto w = make_test_matrix(MatrixKind::kStudentT4, rows, k, 32);
  const Tier tier = Tier::kI4;
  std::vector<uint8_t> data(tier_data_bytes(tier, rows, k));
  std::vector<float> scales(static_cast<size_t>(rows)), got(static_cast<size_t>(k));
  quantize_tier(tier, w.data(), nullptr, rows, k, data.data(), scales.data(), r.data());
  const TierTensor t{tier, data.data(), scales.data(), rows, k};
  int differ = 0;
  for (int64_t row = 0; row < rows; ++row) {
    dequantize_tier_row(t, row, got.data());
    const float scale = scales[static_cast<size_t>(row)];
    std::vector<double> wt(w.begin() + row * k, w.begin() + (row + 1) * k);
    for (int64_t j = 0; j < k; ++j) {
      const double v = scale * std::clamp(std::nearbyint(wt[static_cast<size_t>(j)] / scale), -8.0, 7.0);
      differ += std::fabs(v - got[static_cast<size_t>(j)]) > 1e-6 * scale ? 1 : 0;
      const double e = (wt[static_cast<size_t>(j)] - v) / u[static_cast<size_t>(j * k + j)];
      for (int64_t i = j + 1; i < k; ++i) wt[static_cast<size_t>(i)] -= e * u[static_cast<size_t>(j * k + i)];
    }
  }
  // A weight within rounding of a half step may round the other way.
  EXPECT_LE(differ, 2) << "of " << rows * k;
}

// GPTQ must lower the layer's output error E|(W - W')x|^2 on inputs with
// correlated columns, compared with rounding each weight to nearest.
TEST(Gptq, LowersOutputErrorOnCorrelatedInputs) {
  const int64_t k = 64, rows = 16, samples = 2000;
  const auto w = make_test_matrix(MatrixKind::kGaussian, rows, k, 10);
  // x = A z with a random mixing A: strongly correlated columns.
  const auto a = make_test_matrix(MatrixKind::kGaussian, k, k, 11);
  const auto z = make_test_matrix(MatrixKind::kGaussian, samples, k, 12);
  std::vector<double> h(static_cast<size_t>(k * k), 0.0);
  std::vector<std::vector<float>> xs(samples, std::vector<float>(k));
  for (int64_t s = 0; s < samples; ++s) {
    for (int64_t i = 0; i < k; ++i) {
      double v = 0;
      for (int64_t j = 0; j < k; ++j) v += a[static_cast<size_t>(i * k + j)] * z[static_cast<size_t>(s * k + j)];
      xs[static_cast<size_t>(s)][static_cast<size_t>(i)] = static_cast<float>(v);
    }
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < k; ++j) h[static_cast<size_t>(i * k + j)] += xs[s][i] * static_cast<double>(xs[s][j]) / samples;
    }
  }
  std::vector<float> imp(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) imp[static_cast<size_t>(i)] = static_cast<float>(h[static_cast<size_t>(i * k + i)]);
  const std::vector<double> u = gptq_factor(h, k);
  ASSERT_EQ(u.size(), static_cast<size_t>(k * k));
  auto output_error = [&](const std::vector<float>& recon) {
    double e = 0;
    for (const auto& x : xs) {
      for (int64_t r = 0; r < rows; ++r) {
        double d = 0;
        for (int64_t j = 0; j < k; ++j) d += (w[static_cast<size_t>(r * k + j)] - recon[static_cast<size_t>(r * k + j)]) * x[static_cast<size_t>(j)];
        e += d * d;
      }
    }
    return e;
  };
  for (Tier tier : {Tier::kI4, Tier::kNf4, Tier::kI5, Tier::kI8s}) {
    std::vector<uint8_t> data(tier_data_bytes(tier, rows, k));
    std::vector<float> scales(static_cast<size_t>(rows)), rtn(w.size()), gptq(w.size());
    const TierTensor t{tier, data.data(), scales.data(), rows, k};
    quantize_tier(tier, w.data(), imp.data(), rows, k, data.data(), scales.data());
    for (int64_t r = 0; r < rows; ++r) dequantize_tier_row(t, r, &rtn[static_cast<size_t>(r * k)]);
    quantize_tier(tier, w.data(), imp.data(), rows, k, data.data(), scales.data(), u.data());
    for (int64_t r = 0; r < rows; ++r) dequantize_tier_row(t, r, &gptq[static_cast<size_t>(r * k)]);
    EXPECT_LT(output_error(gptq), 0.8 * output_error(rtn)) << tier_name(tier);
  }
}

}  // namespace
}  // namespace ork
