// i5 and i6: the memory lever between 4 and 8 bits. The code's low four
// bits sit in a nibble plane (read like i4) and its top 1 or 2 bits in a
// narrow plane; q in [-16, 15] or [-32, 31], stored offset to unsigned.
#include <algorithm>
#include <cmath>

#include "quant/planes.h"
#include "quant/scale_search.h"
#include "quant/tier_impl.h"

namespace ork::tiers {

double quantize_wide_row(int extra_bits, const float* w, const float* imp, int64_t k, RowPlanes out, float* scale, float given_scale) {
  const int half = 1 << (3 + extra_bits);  // 16 or 32
  const Grid grid = Grid::integers(-half, half - 1);
  const ScaleChoice c = given_scale > 0 ? ScaleChoice{given_scale, 0.0} : search_scale(w, imp, k, grid);
  const float inv = c.scale != 0.0f ? 1.0f / c.scale : 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    const auto u = static_cast<uint8_t>(grid.index(w[j] * inv));  // q + half
    planes::set_nibble(out.p0, j, u & 0x0F);
    planes::set_bits(out.p1, j, extra_bits, static_cast<uint8_t>(u >> 4));
  }
  *scale = c.scale;
  return c.error;
}

void dequantize_wide_row(int extra_bits, ConstRowPlanes in, float scale, int64_t k, float* out) {
  const int half = 1 << (3 + extra_bits);
  for (int64_t j = 0; j < k; ++j) {
    const int u = planes::get_nibble(in.p0, j) | (planes::get_bits(in.p1, j, extra_bits) << 4);
    out[j] = scale * static_cast<float>(u - half);
  }
}

float snap_wide(int extra_bits, float x) {
  const auto half = static_cast<float>(1 << (3 + extra_bits));
  return std::clamp(std::nearbyint(x), -half, half - 1.0f);
}

}  // namespace ork::tiers
