#include "quant/scale_search.h"

#include <limits>

#include "core/half.h"
#include "quant/scale_error.h"

namespace ork {
namespace {

// A scale as ork stores it: the nearest f16 value where f16 holds the scale
// as a normal number (an orkpack keeps a tensor's scales in f16, half the
// bytes, when every one is an f16 value), rounded up instead where nearest
// falls below min_scale; outside f16's normal range, the f32 itself (the
// tensor then keeps f32 scales). Choosing among f16 values, rather than
// rounding the choice afterwards, lets the search see what is stored.
float storable_scale(float s, float min_scale) {
  constexpr float kF16MinNormal = 6.103515625e-05f, kF16Max = 65504.0f;
  if (!(s >= kF16MinNormal && s <= kF16Max)) return s;
  uint16_t h = f32_to_f16(s);
  if (f16_to_f32(h) < min_scale) ++h;  // the next f16 up (positive, so +1)
  const float v = f16_to_f32(h);
  return std::isfinite(v) ? v : s;
}

// The error of the integer grids and the 16-level codebook, Highway's
// (scale_error.h: most of a pack's time); any other codebook's, here.
double weighted_error(const float* w, const float* imp, int64_t n, const Grid& grid, float scale) {
  if (grid.is_integers()) {
    return integer_grid_error(w, imp, n, static_cast<float>(grid.lo()), static_cast<float>(grid.hi()), scale);
  }
  if (grid.levels().size() == Grid::kMaxLevels) {
    return codebook16_grid_error(w, imp, n, grid.levels().data(), grid.bounds(), scale);
  }
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  double err = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const float r = scale * grid.level(grid.index(w[j] * inv));
    const double d = static_cast<double>(w[j]) - r;
    err += (imp != nullptr ? imp[j] : 1.0f) * d * d;
  }
  return err;
}

// The least-squares sums for the levels the weights take at `scale`
// (ScaleFit): Highway's for the integer grids and the 16-level codebook.
ScaleFit fit(const float* w, const float* imp, int64_t n, const Grid& grid, float scale) {
  if (grid.is_integers()) {
    return integer_grid_fit(w, imp, n, static_cast<float>(grid.lo()), static_cast<float>(grid.hi()), scale);
  }
  if (grid.levels().size() == Grid::kMaxLevels) {
    return codebook16_grid_fit(w, imp, n, grid.levels().data(), grid.bounds(), scale);
  }
  const float inv = 1.0f / scale;
  ScaleFit f;
  for (int64_t j = 0; j < n; ++j) {
    const double v = grid.level(grid.index(w[j] * inv));
    const double iw = imp != nullptr ? imp[j] : 1.0;
    f.num += iw * w[j] * v;
    f.den += iw * v * v;
  }
  return f;
}

}  // namespace

ScaleChoice search_scale(const float* w, const float* imp, int64_t n, const Grid& grid, float min_scale) {
  float amax = 0.0f;
  for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(w[j]));
  ScaleChoice best;
  if (amax == 0.0f) return best;  // an all-zero row: scale 0, codes 0, no error
  best.error = std::numeric_limits<double>::infinity();
  const float base = amax / grid.max_abs();
  constexpr int kSteps = 28;
  for (int i = 0; i <= kSteps; ++i) {
    const float scale = storable_scale(std::max(min_scale, base * (0.5f + 0.7f * static_cast<float>(i) / kSteps)), min_scale);
    const double err = weighted_error(w, imp, n, grid, scale);
    if (err < best.error) best = {scale, err};
  }
  // For fixed codes the best scale is a weighted least-squares fit; a new
  // scale may move some codes, so iterate a little and keep the best.
  for (int iter = 0; iter < 3; ++iter) {
    const ScaleFit f = fit(w, imp, n, grid, best.scale);
    const double num = f.num, den = f.den;
    if (den <= 0.0) break;
    const float scale = storable_scale(std::max(min_scale, static_cast<float>(num / den)), min_scale);
    if (!(scale > 0.0f) || scale == best.scale) break;
    const double err = weighted_error(w, imp, n, grid, scale);
    if (err >= best.error) break;
    best = {scale, err};
  }
  return best;
}

}  // namespace ork
