// i8: one int8 code per weight, q in [-127, 127] (symmetric, so the NPU's
// W8A8 datapath needs no zero point).
#include <algorithm>
#include <cmath>

#include "quant/scale_search.h"
#include "quant/tier_impl.h"

namespace ork::tiers {

double quantize_i8_row(const float* w, const float* imp, int64_t k, RowPlanes out, float* scale, float given_scale) {
  const Grid grid = Grid::integers(-127, 127);
  const ScaleChoice c = given_scale > 0 ? ScaleChoice{given_scale, 0.0} : search_scale(w, imp, k, grid);
  const float inv = c.scale != 0.0f ? 1.0f / c.scale : 0.0f;
  auto* codes = reinterpret_cast<int8_t*>(out.p0);
  for (int64_t j = 0; j < k; ++j) codes[j] = static_cast<int8_t>(grid.level(grid.index(w[j] * inv)));
  *scale = c.scale;
  return c.error;
}

void dequantize_i8_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  const auto* codes = reinterpret_cast<const int8_t*>(in.p0);
  for (int64_t j = 0; j < k; ++j) out[j] = scale * static_cast<float>(codes[j]);
}

float snap_i8(float x) { return std::clamp(std::nearbyint(x), -127.0f, 127.0f); }

}  // namespace ork::tiers
