// The scale search's error (scale_error.h): Highway per target, and the
// scalar reference whose bits every target gives.
#include "quant/scale_error.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#ifndef ORK_QUANT_SCALE_ERROR_ELEMENTS
#define ORK_QUANT_SCALE_ERROR_ELEMENTS
namespace ork::scale_error {

// Weight j goes into lane j % kLanes.
constexpr size_t kLanes = 8;

// Clamping to the grid's bounds first rounds the same; adding and
// subtracting 1.5 * 2^23 rounds half to even (Grid::index).
constexpr float kMagic = 12582912.0f;

inline float integer_level(float x, float lo, float hi) {
  const float c = std::min(std::max(x, lo), hi);
  return (c + kMagic) - kMagic;
}

inline float codebook16_level(float x, const float* levels, const float* bounds) {
  float level = levels[0];
  for (int i = 0; i < 15; ++i) level = x > bounds[i] ? levels[i + 1] : level;
  return level;
}

// One weight's term: the difference and its square in double.
inline double term(float w, const float* imp, int64_t j, float scale, float level) {
  const double d = static_cast<double>(w) - static_cast<double>(scale * level);
  return imp != nullptr ? static_cast<double>(imp[j]) * d * d : d * d;
}

// One weight's terms of the fit: imp w level and imp level^2.
inline void fit_terms(float w, const float* imp, int64_t j, float level, double* num, double* den) {
  const double v = level, iw = imp != nullptr ? static_cast<double>(imp[j]) : 1.0;
  *num += iw * static_cast<double>(w) * v;
  *den += iw * v * v;
}

inline double add_lanes(const double* lane) {
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// Weights [from, n) one by one into their lanes (the reference's loop, and
// every target's tail).
template <class Level>
void add_terms(const float* w, const float* imp, int64_t from, int64_t n, float scale, float inv, Level level,
               double* lane) {
  for (int64_t j = from; j < n; ++j) {
    lane[static_cast<size_t>(j) % kLanes] += term(w[j], imp, j, scale, level(w[j] * inv));
  }
}

// 1 / scale, or 0 (every level 0) where that is not a finite float: a
// scale of 0, or one so small that its reciprocal overflows, where w * inf
// would be NaN for w = 0 - and a NaN clamps differently on each target.
template <class Level>
void add_fit_terms(const float* w, const float* imp, int64_t from, int64_t n, float inv, Level level, double* num,
                   double* den) {
  for (int64_t j = from; j < n; ++j) {
    const size_t l = static_cast<size_t>(j) % kLanes;
    fit_terms(w[j], imp, j, level(w[j] * inv), &num[l], &den[l]);
  }
}

inline float inverse(float scale) {
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  return std::isfinite(inv) ? inv : 0.0f;
}

}  // namespace ork::scale_error
#endif  // ORK_QUANT_SCALE_ERROR_ELEMENTS

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/scale_error.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace ork {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D64 = hn::ScalableTag<double>;
using DF = hn::ScalableTag<float>;
using D32 = hn::Rebind<float, D64>;  // as many floats as a vector has doubles
static_assert(HWY_MAX_BYTES / sizeof(double) <= scale_error::kLanes, "a vector of doubles holds at most the eight lanes");

// The eight lanes are kLanes / Lanes(D64) vectors of doubles, weight j in
// lane j % 8 on every target; a step is one round of them. `vlevel` gives
// a vector of x's levels, `level` one x's; `add(group, w, level, at)` adds
// a vector of doubles' worth of weights (w[at...], their levels in float)
// into lane group `group`. kWide: the levels found on whole vectors of
// floats (twice a vector of doubles; on the scalar target, one lane) and
// split in halves - nf4's fifteen comparisons a weight ran 1.36 -> 2.2 G
// weights/s on AVX3 so; the integer grids' few were 5.2 -> 4.9, and stay
// on half vectors.
template <bool kWide, class VLevel, class Add>
HWY_INLINE int64_t ForEachStep(const float* w, int64_t n, float inv, VLevel vlevel, Add add) {
  constexpr size_t L = hn::MaxLanes(D64());
  constexpr size_t LF = kWide && HWY_TARGET != HWY_SCALAR ? 2 * L : L;
  constexpr size_t kStep = LF > scale_error::kLanes ? LF : scale_error::kLanes;
  const D32 d32;
  const DF df;
  const auto inv32 = hn::Set(d32, inv);
  [[maybe_unused]] const auto inv_wide = hn::Set(df, inv);
  int64_t j = 0;
  for (; j + static_cast<int64_t>(kStep) <= n; j += static_cast<int64_t>(kStep)) {
    for (size_t f = 0; f < kStep / LF; ++f) {
      const int64_t at = j + static_cast<int64_t>(f * LF);
      const size_t group = (f * LF) % scale_error::kLanes / L;
      if constexpr (LF == L) {
        const auto wv = hn::LoadU(d32, w + at);
        add(group, wv, vlevel(hn::Mul(wv, inv32)), at);
      } else {
#if HWY_TARGET != HWY_SCALAR
        const auto wv = hn::LoadU(df, w + at);
        const auto lv = vlevel(hn::Mul(wv, inv_wide));
        add(group, hn::LowerHalf(d32, wv), hn::LowerHalf(d32, lv), at);
        add((f * LF + L) % scale_error::kLanes / L, hn::UpperHalf(d32, wv), hn::UpperHalf(d32, lv),
            at + static_cast<int64_t>(L));
#endif
      }
    }
  }
  return j;
}

template <bool kWide, bool kImp, class VLevel, class Level>
HWY_INLINE double ErrorSums(const float* w, const float* imp, int64_t n, float scale, VLevel vlevel, Level level) {
  const D64 d64;
  const D32 d32;
  constexpr size_t kLanes = scale_error::kLanes, L = hn::MaxLanes(D64());
  const float inv = scale_error::inverse(scale);
  const auto vscale = hn::Set(d32, scale);
  hn::Vec<D64> acc[kLanes];
  for (size_t i = 0; i < kLanes / L; ++i) acc[i] = hn::Zero(d64);
  const int64_t j = ForEachStep<kWide>(w, n, inv, vlevel, [&](size_t g, hn::Vec<D32> wv, hn::Vec<D32> lv, int64_t at) HWY_ATTR {
    const auto d = hn::Sub(hn::PromoteTo(d64, wv), hn::PromoteTo(d64, hn::Mul(vscale, lv)));
    if constexpr (kImp) {
      const auto iv = hn::PromoteTo(d64, hn::LoadU(d32, imp + at));
      acc[g] = hn::Add(acc[g], hn::Mul(hn::Mul(iv, d), d));
    } else {
      acc[g] = hn::Add(acc[g], hn::Mul(d, d));
    }
  });
  HWY_ALIGN double lane[kLanes];
  for (size_t i = 0; i < kLanes / L; ++i) hn::Store(acc[i], d64, lane + i * L);
  scale_error::add_terms(w, imp, j, n, scale, inv, level, lane);
  return scale_error::add_lanes(lane);
}

// The fit's two sums in the same eight lanes.
template <bool kWide, bool kImp, class VLevel, class Level>
HWY_INLINE ScaleFit FitSums(const float* w, const float* imp, int64_t n, float scale, VLevel vlevel, Level level) {
  const D64 d64;
  const D32 d32;
  constexpr size_t kLanes = scale_error::kLanes, L = hn::MaxLanes(D64());
  const float inv = scale_error::inverse(scale);
  hn::Vec<D64> num[kLanes], den[kLanes];
  for (size_t i = 0; i < kLanes / L; ++i) num[i] = den[i] = hn::Zero(d64);
  const int64_t j = ForEachStep<kWide>(w, n, inv, vlevel, [&](size_t g, hn::Vec<D32> wv, hn::Vec<D32> lv, int64_t at) HWY_ATTR {
    const auto v = hn::PromoteTo(d64, lv);
    auto iw_w = hn::PromoteTo(d64, wv), iw_v = v;
    if constexpr (kImp) {
      const auto iv = hn::PromoteTo(d64, hn::LoadU(d32, imp + at));
      iw_w = hn::Mul(iv, iw_w);
      iw_v = hn::Mul(iv, v);
    }
    num[g] = hn::Add(num[g], hn::Mul(iw_w, v));
    den[g] = hn::Add(den[g], hn::Mul(iw_v, v));
  });
  HWY_ALIGN double num_lane[kLanes], den_lane[kLanes];
  for (size_t i = 0; i < kLanes / L; ++i) {
    hn::Store(num[i], d64, num_lane + i * L);
    hn::Store(den[i], d64, den_lane + i * L);
  }
  scale_error::add_fit_terms(w, imp, j, n, inv, level, num_lane, den_lane);
  return {scale_error::add_lanes(num_lane), scale_error::add_lanes(den_lane)};
}

// ErrorSums and FitSums with or without importances (imp null).
template <bool kWide, class VLevel, class Level>
HWY_INLINE double GridError(const float* w, const float* imp, int64_t n, float scale, VLevel vlevel, Level level) {
  return imp != nullptr ? ErrorSums<kWide, true>(w, imp, n, scale, vlevel, level)
                        : ErrorSums<kWide, false>(w, imp, n, scale, vlevel, level);
}

template <bool kWide, class VLevel, class Level>
HWY_INLINE ScaleFit GridFit(const float* w, const float* imp, int64_t n, float scale, VLevel vlevel, Level level) {
  return imp != nullptr ? FitSums<kWide, true>(w, imp, n, scale, vlevel, level)
                        : FitSums<kWide, false>(w, imp, n, scale, vlevel, level);
}

// Runs `run(vlevel, level)` with an integer grid's level of a vector and of
// one value.
template <class Run>
HWY_INLINE auto WithIntegerLevels(float lo, float hi, Run run) {
  const D32 d32;
  const auto vlo = hn::Set(d32, lo), vhi = hn::Set(d32, hi), magic = hn::Set(d32, scale_error::kMagic);
  auto vlevel = [&](hn::Vec<D32> x) HWY_ATTR { return hn::Sub(hn::Add(hn::Min(hn::Max(x, vlo), vhi), magic), magic); };
  auto level = [&](float x) { return scale_error::integer_level(x, lo, hi); };
  return run(vlevel, level);
}

// The same for the 16-level codebook.
template <class Run>
HWY_INLINE auto WithCodebook16Levels(const float* levels, const float* bounds, Run run) {
  auto vlevel = [&](auto x) HWY_ATTR {
    const hn::DFromV<decltype(x)> d;
    auto level = hn::Set(d, levels[0]);
    for (int i = 0; i < 15; ++i) level = hn::IfThenElse(hn::Gt(x, hn::Set(d, bounds[i])), hn::Set(d, levels[i + 1]), level);
    return level;
  };
  auto level = [&](float x) { return scale_error::codebook16_level(x, levels, bounds); };
  return run(vlevel, level);
}

double IntegerGridError(const float* w, const float* imp, int64_t n, float lo, float hi, float scale) {
  return WithIntegerLevels(lo, hi, [&](auto vlevel, auto level) HWY_ATTR {
    return GridError<false>(w, imp, n, scale, vlevel, level);
  });
}

double Codebook16GridError(const float* w, const float* imp, int64_t n, const float* levels, const float* bounds,
                           float scale) {
  return WithCodebook16Levels(levels, bounds, [&](auto vlevel, auto level) HWY_ATTR {
    return GridError<true>(w, imp, n, scale, vlevel, level);
  });
}

ScaleFit IntegerGridFit(const float* w, const float* imp, int64_t n, float lo, float hi, float scale) {
  return WithIntegerLevels(lo, hi, [&](auto vlevel, auto level) HWY_ATTR {
    return GridFit<false>(w, imp, n, scale, vlevel, level);
  });
}

ScaleFit Codebook16GridFit(const float* w, const float* imp, int64_t n, const float* levels, const float* bounds,
                           float scale) {
  return WithCodebook16Levels(levels, bounds, [&](auto vlevel, auto level) HWY_ATTR {
    return GridFit<true>(w, imp, n, scale, vlevel, level);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace ork
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ork {

HWY_EXPORT(IntegerGridError);
HWY_EXPORT(Codebook16GridError);
HWY_EXPORT(IntegerGridFit);
HWY_EXPORT(Codebook16GridFit);

double integer_grid_error(const float* w, const float* imp, int64_t n, float lo, float hi, float scale) {
  return HWY_DYNAMIC_DISPATCH(IntegerGridError)(w, imp, n, lo, hi, scale);
}

double codebook16_grid_error(const float* w, const float* imp, int64_t n, const float* levels, const float* bounds,
                             float scale) {
  return HWY_DYNAMIC_DISPATCH(Codebook16GridError)(w, imp, n, levels, bounds, scale);
}

ScaleFit integer_grid_fit(const float* w, const float* imp, int64_t n, float lo, float hi, float scale) {
  return HWY_DYNAMIC_DISPATCH(IntegerGridFit)(w, imp, n, lo, hi, scale);
}

ScaleFit codebook16_grid_fit(const float* w, const float* imp, int64_t n, const float* levels, const float* bounds,
                             float scale) {
  return HWY_DYNAMIC_DISPATCH(Codebook16GridFit)(w, imp, n, levels, bounds, scale);
}

namespace ref {
namespace {

template <class Level>
ScaleFit fit(const float* w, const float* imp, int64_t n, float scale, Level level) {
  double num[scale_error::kLanes] = {}, den[scale_error::kLanes] = {};
  scale_error::add_fit_terms(w, imp, 0, n, scale_error::inverse(scale), level, num, den);
  return {scale_error::add_lanes(num), scale_error::add_lanes(den)};
}

}  // namespace

double integer_grid_error(const float* w, const float* imp, int64_t n, float lo, float hi, float scale) {
  double lane[scale_error::kLanes] = {};
  scale_error::add_terms(w, imp, 0, n, scale, scale_error::inverse(scale),
                         [&](float x) { return scale_error::integer_level(x, lo, hi); }, lane);
  return scale_error::add_lanes(lane);
}

double codebook16_grid_error(const float* w, const float* imp, int64_t n, const float* levels, const float* bounds,
                             float scale) {
  double lane[scale_error::kLanes] = {};
  scale_error::add_terms(w, imp, 0, n, scale, scale_error::inverse(scale),
                         [&](float x) { return scale_error::codebook16_level(x, levels, bounds); }, lane);
  return scale_error::add_lanes(lane);
}

ScaleFit integer_grid_fit(const float* w, const float* imp, int64_t n, float lo, float hi, float scale) {
  return fit(w, imp, n, scale, [&](float x) { return scale_error::integer_level(x, lo, hi); });
}

ScaleFit codebook16_grid_fit(const float* w, const float* imp, int64_t n, const float* levels, const float* bounds,
                             float scale) {
  return fit(w, imp, n, scale, [&](float x) { return scale_error::codebook16_level(x, levels, bounds); });
}

}  // namespace ref
}  // namespace ork
#endif  // HWY_ONCE
