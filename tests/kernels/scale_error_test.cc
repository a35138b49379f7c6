// The scale search's error on every SIMD target: the scalar reference's
// bits exactly (a pack is the same on every machine), and the reference
// against the sum it stands for.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/every_target.h"
#include "quant/scale_error.h"
#include "quant/scale_search.h"

namespace ork {
namespace {

using testing::normal_vector;

// nf4's codebook (quant/tier_nf4.cc), the 16 levels the packer searches.
constexpr float kNf4[16] = {-1.0f,      -0.6961928f, -0.5250731f, -0.3949175f, -0.2844414f, -0.1847734f,
                            -0.0910500f, 0.0f,       0.0795803f,  0.1609302f,  0.2461123f,  0.3379152f,
                            0.4407098f,  0.5626170f, 0.7229568f,  1.0f};

class ScaleError : public testing::EveryTargetTest {};

// Lengths around the eight lanes and the rows packs measure.
constexpr int64_t kLengths[] = {0, 1, 7, 8, 9, 15, 16, 17, 100, 512, 2048, 2051};

std::vector<float> importance(int64_t n, uint32_t seed) {
  std::vector<float> imp = normal_vector(n, seed);
  for (float& x : imp) x = x * x + 0.01f;
  return imp;
}

// The sum the reference stands for, in one double in weight order.
double plain_sum(const std::vector<float>& w, const float* imp, float scale, float inv,
                 const std::function<float(float)>& level) {
  double err = 0.0;
  for (size_t j = 0; j < w.size(); ++j) {
    const double d = static_cast<double>(w[j]) - static_cast<double>(scale * level(w[j] * inv));
    err += (imp != nullptr ? static_cast<double>(imp[j]) : 1.0) * d * d;
  }
  return err;
}

TEST_F(ScaleError, IntegerGridsGiveTheReferenceBitsOnEveryTarget) {
  const float grids[][2] = {{-8, 7}, {-16, 15}, {-32, 31}, {-128, 127}};
  for (int t = 0; t < cpu::compiled_target_count(); ++t) {
    cpu::force_target(t);
    for (int64_t n : kLengths) {
      const std::vector<float> w = normal_vector(n, static_cast<uint32_t>(n) + 1, 0.02f);
      const std::vector<float> imp = importance(n, static_cast<uint32_t>(n) + 2);
      for (const auto& g : grids) {
        // Scales below, at and above the row's best, zero, and one whose
        // reciprocal overflows (every level 0).
        for (float scale : {0.0005f, 0.004f, 0.01f, 0.3f, 0.0f, 1e-39f}) {
          for (const float* im : {static_cast<const float*>(nullptr), imp.data()}) {
            const double want = ref::integer_grid_error(w.data(), im, n, g[0], g[1], scale);
            const double got = integer_grid_error(w.data(), im, n, g[0], g[1], scale);
            EXPECT_EQ(got, want) << cpu::target_name(t) << " n " << n << " grid " << g[1] << " scale " << scale
                                 << (im != nullptr ? " weighted" : "");
          }
        }
      }
    }
  }
}

TEST_F(ScaleError, TheNf4CodebookGivesTheReferenceBitsOnEveryTarget) {
  const Grid grid = Grid::codebook(kNf4);
  ASSERT_EQ(grid.levels().size(), Grid::kMaxLevels);
  for (int t = 0; t < cpu::compiled_target_count(); ++t) {
    cpu::force_target(t);
    for (int64_t n : kLengths) {
      const std::vector<float> w = normal_vector(n, static_cast<uint32_t>(n) + 3, 0.02f);
      const std::vector<float> imp = importance(n, static_cast<uint32_t>(n) + 4);
      for (float scale : {0.003f, 0.02f, 0.05f, 0.0f}) {
        for (const float* im : {static_cast<const float*>(nullptr), imp.data()}) {
          const double want = ref::codebook16_grid_error(w.data(), im, n, grid.levels().data(), grid.bounds(), scale);
          const double got = codebook16_grid_error(w.data(), im, n, grid.levels().data(), grid.bounds(), scale);
          EXPECT_EQ(got, want) << cpu::target_name(t) << " n " << n << " scale " << scale;
        }
      }
    }
  }
}

// The least-squares fit's two sums, likewise.
TEST_F(ScaleError, TheFitsGiveTheReferenceBitsOnEveryTarget) {
  const Grid nf4 = Grid::codebook(kNf4);
  for (int t = 0; t < cpu::compiled_target_count(); ++t) {
    cpu::force_target(t);
    for (int64_t n : kLengths) {
      const std::vector<float> w = normal_vector(n, static_cast<uint32_t>(n) + 7, 0.02f);
      const std::vector<float> imp = importance(n, static_cast<uint32_t>(n) + 8);
      for (float scale : {0.002f, 0.006f, 0.02f, 1e-39f}) {
        for (const float* im : {static_cast<const float*>(nullptr), imp.data()}) {
          const ScaleFit want = ref::integer_grid_fit(w.data(), im, n, -16, 15, scale);
          const ScaleFit got = integer_grid_fit(w.data(), im, n, -16, 15, scale);
          EXPECT_EQ(got.num, want.num) << cpu::target_name(t) << " n " << n << " scale " << scale;
          EXPECT_EQ(got.den, want.den) << cpu::target_name(t) << " n " << n << " scale " << scale;
          const ScaleFit bw = ref::codebook16_grid_fit(w.data(), im, n, nf4.levels().data(), nf4.bounds(), scale);
          const ScaleFit bg = codebook16_grid_fit(w.data(), im, n, nf4.levels().data(), nf4.bounds(), scale);
          EXPECT_EQ(bg.num, bw.num) << cpu::target_name(t) << " n " << n << " scale " << scale;
          EXPECT_EQ(bg.den, bw.den) << cpu::target_name(t) << " n " << n << " scale " << scale;
        }
      }
    }
  }
}

// The reference is the weighted squared error of the grid's nearest levels
// (Grid::index), summed in another order than one double's.
TEST(ScaleErrorReference, IsTheWeightedErrorOfTheNearestLevels) {
  const int64_t n = 2051;
  const std::vector<float> w = normal_vector(n, 5, 0.02f);
  const std::vector<float> imp = importance(n, 6);
  const Grid i4 = Grid::integers(-8, 7);
  const Grid nf4 = Grid::codebook(kNf4);
  for (float scale : {0.002f, 0.006f, 0.02f}) {
    for (const float* im : {static_cast<const float*>(nullptr), imp.data()}) {
      const double ints = plain_sum(w, im, scale, 1.0f / scale, [&](float x) { return i4.level(i4.index(x)); });
      EXPECT_NEAR(ref::integer_grid_error(w.data(), im, n, -8, 7, scale), ints, 1e-12 * ints) << scale;
      const double book = plain_sum(w, im, scale, 1.0f / scale, [&](float x) { return nf4.level(nf4.index(x)); });
      EXPECT_NEAR(ref::codebook16_grid_error(w.data(), im, n, nf4.levels().data(), nf4.bounds(), scale), book,
                  1e-12 * book)
          << scale;
    }
  }
  // The fit's sums: imp w level and imp level^2 over the nearest levels.
  for (const float* im : {static_cast<const float*>(nullptr), imp.data()}) {
    double num = 0, den = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double v = i4.level(i4.index(w[static_cast<size_t>(j)] * (1.0f / 0.004f)));
      const double iw = im != nullptr ? im[j] : 1.0;
      num += iw * w[static_cast<size_t>(j)] * v;
      den += iw * v * v;
    }
    const ScaleFit f = ref::integer_grid_fit(w.data(), im, n, -8, 7, 0.004f);
    EXPECT_NEAR(f.num, num, 1e-12 * std::fabs(num));
    EXPECT_NEAR(f.den, den, 1e-12 * den);
  }
  // Scale 0: every level 0, the error the weights' own energy.
  const double energy = plain_sum(w, imp.data(), 0.0f, 0.0f, [](float) { return 0.0f; });
  EXPECT_NEAR(ref::integer_grid_error(w.data(), imp.data(), n, -8, 7, 0.0f), energy, 1e-12 * energy);
}

}  // namespace
}  // namespace ork
