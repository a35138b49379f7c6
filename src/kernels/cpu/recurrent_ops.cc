// Recurrent token mixers of the CPU engine (recurrent_ops.h).
#include "kernels/cpu/recurrent_ops.h"

#include <cmath>
#include <cstddef>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/recurrent_ops.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace ork::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

void ShortConv(const float* bcx, int n, int width, const float* w, int taps, const float* history, float* u,
               float* out) {
  const DF d;
  const auto W = static_cast<size_t>(width);
  const size_t L = hn::Lanes(d);
  // The row tap i of token t reads: its own batch's u, or the history.
  auto row = [&](int t, int i) -> const float* {
    const int src = t - (taps - 1) + i;
    return src >= 0 ? u + static_cast<size_t>(src) * W : history + static_cast<size_t>(taps - 1 + src) * W;
  };
  for (size_t t = 0; t < static_cast<size_t>(n); ++t) {
    const float* b = bcx + t * 3 * W;
    size_t j = 0;
    for (; j + L <= W; j += L) hn::StoreU(hn::Mul(hn::LoadU(d, b + j), hn::LoadU(d, b + 2 * W + j)), d, u + t * W + j);
    for (; j < W; ++j) u[t * W + j] = b[j] * b[2 * W + j];
  }
  for (int t = 0; t < n; ++t) {
    const float* c = bcx + static_cast<size_t>(t) * 3 * W + W;
    float* o = out + static_cast<size_t>(t) * W;
    size_t j = 0;
    for (; j + L <= W; j += L) {
      auto acc = hn::Mul(hn::LoadU(d, w + j), hn::LoadU(d, row(t, 0) + j));
      for (int i = 1; i < taps; ++i) {
        acc = hn::MulAdd(hn::LoadU(d, w + static_cast<size_t>(i) * W + j), hn::LoadU(d, row(t, i) + j), acc);
      }
      hn::StoreU(hn::Mul(hn::LoadU(d, c + j), acc), d, o + j);
    }
    for (; j < W; ++j) {
      float acc = w[j] * row(t, 0)[j];
      for (int i = 1; i < taps; ++i) acc = std::fma(w[static_cast<size_t>(i) * W + j], row(t, i)[j], acc);
      o[j] = c[j] * acc;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ork::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ork::cpu {

HWY_EXPORT(ShortConv);

void short_conv(const float* bcx, int n, int width, const float* w, int taps, const float* history, float* u,
                float* out) {
  HWY_DYNAMIC_DISPATCH(ShortConv)(bcx, n, width, w, taps, history, u, out);
}

}  // namespace ork::cpu
#endif  // HWY_ONCE
