// The error the scale search compares: sum over a row of importance_j *
// (w_j - scale * level_j)^2, for the integer grids and the 16-level
// codebook (nf4), evaluated ~30 times for every row of every matrix a pack
// measures and writes, and the least-squares fit that refines the best
// scale. Highway, one dispatch per call, with a scalar reference (ref::).
//
// Every target gives the reference's bits: each weight's level and
// difference are computed as the reference computes them (float, no fused
// multiply-add, the difference and its square in double), and the terms
// are summed in eight lanes - weight j into lane j % 8, in order - which are
// added ((0+1)+(2+3))+((4+5)+(6+7)). A pack is the same on every machine.
#pragma once

#include <cstdint>

namespace ork {

// The weights rounded to the integers [lo, hi] in units of `scale` (a scale
// of 0, or one whose reciprocal overflows: every level 0). imp may be null
// (every weight's importance 1).
double integer_grid_error(const float* w, const float* imp, int64_t n, float lo, float hi, float scale);

// The weights given the level of 16 `levels` that their w / scale falls
// on: levels[0], or levels[i + 1] for the last i with w / scale > bounds[i]
// (15 ascending decision bounds).
double codebook16_grid_error(const float* w, const float* imp, int64_t n, const float* levels, const float* bounds,
                             float scale);

// The least-squares fit of a scale to the levels the weights take at
// `scale`: num = sum imp_j w_j level_j and den = sum imp_j level_j^2 (the
// best scale for those levels is num / den), in double, in the same eight
// lanes.
struct ScaleFit {
  double num = 0.0, den = 0.0;
};
ScaleFit integer_grid_fit(const float* w, const float* imp, int64_t n, float lo, float hi, float scale);
ScaleFit codebook16_grid_fit(const float* w, const float* imp, int64_t n, const float* levels, const float* bounds,
                             float scale);

namespace ref {
double integer_grid_error(const float* w, const float* imp, int64_t n, float lo, float hi, float scale);
double codebook16_grid_error(const float* w, const float* imp, int64_t n, const float* levels, const float* bounds,
                             float scale);
ScaleFit integer_grid_fit(const float* w, const float* imp, int64_t n, float lo, float hi, float scale);
ScaleFit codebook16_grid_fit(const float* w, const float* imp, int64_t n, const float* levels, const float* bounds,
                             float scale);
}  // namespace ref

}  // namespace ork
