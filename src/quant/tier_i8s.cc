// i8s, the split tier: w ~ s * (h + l/16). h is the round-to-nearest code
// (|h| <= 7, so it is a valid i4 code by itself) and l the rounded residual
// in sixteenths. The CPU reads the high plane alone (i4 speed); 16h + l is
// an int8 code with scale s/16 for the NPU. One stored copy, two precisions.
//
// The scale is searched for the high plane's error, but never below
// max|w| / 7.4375, the largest value h + l/16 reaches: a smaller scale
// would clip outliers that the int8 reading could otherwise represent, and
// i8s exists for sensitive tensors whose int8 reading must be i8-class.
#include <algorithm>
#include <cmath>

#include "quant/planes.h"
#include "quant/scale_search.h"
#include "quant/tier_impl.h"

namespace ork::tiers {

double quantize_i8s_row(const float* w, const float* imp, int64_t k, RowPlanes out, float* scale, float given_scale) {
  const Grid grid = Grid::integers(-7, 7);
  float amax = 0.0f;
  for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(w[j]));
  const ScaleChoice c = given_scale > 0 ? ScaleChoice{given_scale, 0.0} : search_scale(w, imp, k, grid, amax / 7.4375f);
  const float s = c.scale;
  const float inv = s != 0.0f ? 1.0f / s : 0.0f;
  double err = 0.0;
  for (int64_t j = 0; j < k; ++j) {
    const float x = w[j] * inv;
    const float h = grid.level(grid.index(x));
    const float l = std::clamp(std::nearbyint((x - h) * 16.0f), -8.0f, 7.0f);
    planes::set_nibble(out.p0, j, static_cast<uint8_t>(static_cast<int>(h) + 8));
    planes::set_nibble(out.p1, j, static_cast<uint8_t>(static_cast<int>(l) + 8));
    const double d = static_cast<double>(w[j]) - static_cast<double>(s) * (h + l / 16.0f);
    err += (imp != nullptr ? imp[j] : 1.0f) * d * d;
  }
  *scale = s;
  return err;
}

void dequantize_i8s_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  const float step = scale / 16.0f;
  for (int64_t j = 0; j < k; ++j) {
    const int code = 16 * (planes::get_nibble(in.p0, j) - 8) + (planes::get_nibble(in.p1, j) - 8);
    out[j] = step * static_cast<float>(code);
  }
}

void dequantize_i8s_high_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  for (int64_t j = 0; j < k; ++j) out[j] = scale * static_cast<float>(planes::get_nibble(in.p0, j) - 8);
}

float snap_i8s(float x) {
  const float h = std::clamp(std::nearbyint(x), -7.0f, 7.0f);
  const float l = std::clamp(std::nearbyint((x - h) * 16.0f), -8.0f, 7.0f);
  return h + l / 16.0f;
}

}  // namespace ork::tiers
