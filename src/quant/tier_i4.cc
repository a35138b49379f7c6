// i4: q in [-8, 7] stored as the nibble q + 8: the NPU's W4A4 code.
#include <algorithm>
#include <cmath>

#include "quant/planes.h"
#include "quant/scale_search.h"
#include "quant/tier_impl.h"

namespace ork::tiers {

double quantize_i4_row(const float* w, const float* imp, int64_t k, RowPlanes out, float* scale, float given_scale) {
  const Grid grid = Grid::integers(-8, 7);
  const ScaleChoice c = given_scale > 0 ? ScaleChoice{given_scale, 0.0} : search_scale(w, imp, k, grid);
  const float inv = c.scale != 0.0f ? 1.0f / c.scale : 0.0f;
  for (int64_t j = 0; j < k; ++j) planes::set_nibble(out.p0, j, static_cast<uint8_t>(grid.index(w[j] * inv)));
  *scale = c.scale;
  return c.error;
}

void dequantize_i4_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  for (int64_t j = 0; j < k; ++j) out[j] = scale * static_cast<float>(planes::get_nibble(in.p0, j) - 8);
}

float snap_i4(float x) { return std::clamp(std::nearbyint(x), -8.0f, 7.0f); }

}  // namespace ork::tiers
