// nf4: a nibble indexes the 16-value NormalFloat codebook (quantiles of a
// normal distribution), more accurate than i4 for bell-shaped rows at the
// same bytes; the CPU inflates it with a byte shuffle.
#include <array>

#include <algorithm>
#include <cmath>

#include "quant/planes.h"
#include "quant/scale_search.h"
#include "quant/tier_impl.h"

namespace ork::tiers {
namespace {

constexpr std::array<float, 16> kNf4 = {
    -1.0f,         -0.6961928f, -0.5250731f, -0.3949175f, -0.2844414f, -0.1847734f, -0.0910500f, 0.0f,
    0.0795803f,    0.1609302f,  0.2461123f,  0.3379152f,  0.4407098f,  0.5626170f,  0.7229568f,  1.0f};

// The codebook's grid, made once (Grid finds its bounds by bisection).
const Grid& nf4_grid() {
  static const Grid grid = Grid::codebook(kNf4);
  return grid;
}

}  // namespace

double quantize_nf4_row(const float* w, const float* imp, int64_t k, RowPlanes out, float* scale, float given_scale) {
  const Grid& grid = nf4_grid();
  const ScaleChoice c = given_scale > 0 ? ScaleChoice{given_scale, 0.0} : search_scale(w, imp, k, grid);
  const float inv = c.scale != 0.0f ? 1.0f / c.scale : 0.0f;
  for (int64_t j = 0; j < k; ++j) planes::set_nibble(out.p0, j, static_cast<uint8_t>(grid.index(w[j] * inv)));
  *scale = c.scale;
  return c.error;
}

void dequantize_nf4_row(ConstRowPlanes in, float scale, int64_t k, float* out) {
  for (int64_t j = 0; j < k; ++j) out[j] = scale * kNf4[planes::get_nibble(in.p0, j)];
}

float snap_nf4(float x) {
  const Grid& grid = nf4_grid();
  return grid.level(grid.index(x));
}

}  // namespace ork::tiers

namespace ork {
const std::array<float, 16>& nf4_codebook() { return tiers::kNf4; }
}  // namespace ork
