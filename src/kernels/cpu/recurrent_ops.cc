// Recurrent token mixers of the CPU engine (recurrent_ops.h).
#include "kernels/cpu/recurrent_ops.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/recurrent_ops.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace ork::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// The causal depthwise convolution of n tokens: for each token t and
// channel j, sum_i w[i][j] * x_{t-(taps-1)+i}[j] (the rows before the batch
// from `history`), the taps summed in order with FMAs, handed to
// vec_out(t, j, acc) a vector of channels at a time and to one_out(t, j,
// acc) for the tail, so every channel is computed the same way wherever
// its token falls.
template <class VecOut, class OneOut>
HWY_INLINE void CausalConv(const float* x, int n, size_t W, const float* w, int taps, const float* history,
                           VecOut vec_out, OneOut one_out) {
  const DF d;
  const size_t L = hn::Lanes(d);
  auto row = [&](int t, int i) -> const float* {
    const int src = t - (taps - 1) + i;
    return src >= 0 ? x + static_cast<size_t>(src) * W : history + static_cast<size_t>(taps - 1 + src) * W;
  };
  for (int t = 0; t < n; ++t) {
    size_t j = 0;
    for (; j + L <= W; j += L) {
      auto acc = hn::Mul(hn::LoadU(d, w + j), hn::LoadU(d, row(t, 0) + j));
      for (int i = 1; i < taps; ++i) {
        acc = hn::MulAdd(hn::LoadU(d, w + static_cast<size_t>(i) * W + j), hn::LoadU(d, row(t, i) + j), acc);
      }
      vec_out(static_cast<size_t>(t), j, acc);
    }
    for (; j < W; ++j) {
      float acc = w[j] * row(t, 0)[j];
      for (int i = 1; i < taps; ++i) acc = std::fma(w[static_cast<size_t>(i) * W + j], row(t, i)[j], acc);
      one_out(static_cast<size_t>(t), j, acc);
    }
  }
}

void ShortConv(const float* bcx, int n, int width, const float* w, int taps, const float* history, float* u,
               float* out) {
  const DF d;
  const auto W = static_cast<size_t>(width);
  const size_t L = hn::Lanes(d);
  for (size_t t = 0; t < static_cast<size_t>(n); ++t) {  // u = B * X
    const float* b = bcx + t * 3 * W;
    size_t j = 0;
    for (; j + L <= W; j += L) hn::StoreU(hn::Mul(hn::LoadU(d, b + j), hn::LoadU(d, b + 2 * W + j)), d, u + t * W + j);
    for (; j < W; ++j) u[t * W + j] = b[j] * b[2 * W + j];
  }
  auto c = [&](size_t t) { return bcx + t * 3 * W + W; };
  CausalConv(
      u, n, W, w, taps, history,
      [&](size_t t, size_t j, hn::Vec<DF> acc) HWY_ATTR {
        hn::StoreU(hn::Mul(hn::LoadU(d, c(t) + j), acc), d, out + t * W + j);
      },
      [&](size_t t, size_t j, float acc) { out[t * W + j] = c(t)[j] * acc; });
}

void ConvSilu(const float* x, int n, int width, const float* w, int taps, const float* history, float* out) {
  const DF d;
  const auto W = static_cast<size_t>(width);
  CausalConv(
      x, n, W, w, taps, history,
      [&](size_t t, size_t j, hn::Vec<DF> acc) HWY_ATTR {
        hn::StoreU(hn::Div(acc, hn::Add(hn::Set(d, 1.0f), hn::Exp(d, hn::Neg(acc)))), d, out + t * W + j);
      },
      [&](size_t t, size_t j, float acc) { out[t * W + j] = acc / (1.0f + std::exp(-acc)); });
}

HWY_INLINE float InverseL2(const float* x, int n) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss = std::fma(x[i], x[i], ss);
  return 1.0f / std::max(std::sqrt(ss), 1e-6f);
}

void DeltaRule(float* S, int k_dim, int v_dim, int n, const float* q, const float* k, const float* v, int64_t stride,
               const float* beta, const float* decay, int64_t gate_stride, float scale, float* out,
               int64_t out_stride) {
  const DF d;
  const auto V = static_cast<size_t>(v_dim);
  const size_t L = hn::Lanes(d);
  thread_local std::vector<float> kt, qt, sk, acc;
  kt.resize(static_cast<size_t>(k_dim));
  qt.resize(static_cast<size_t>(k_dim));
  sk.resize(V);
  acc.resize(V);
  for (int t = 0; t < n; ++t) {
    const float* qr = q + t * stride;
    const float* kr = k + t * stride;
    const float* vr = v + t * stride;
    const float qn = InverseL2(qr, k_dim), kn = InverseL2(kr, k_dim);
    for (int i = 0; i < k_dim; ++i) {
      qt[static_cast<size_t>(i)] = qr[i] * qn;
      kt[static_cast<size_t>(i)] = kr[i] * kn;
    }
    const float dec = decay[t * gate_stride], b = beta[t * gate_stride];
    std::fill(sk.begin(), sk.end(), 0.0f);
    std::fill(acc.begin(), acc.end(), 0.0f);
    // S = decay S, and S^T k, row by row.
    for (size_t i = 0; i < static_cast<size_t>(k_dim); ++i) {
      float* r = S + i * V;
      const auto vd = hn::Set(d, dec), vk = hn::Set(d, kt[i]);
      size_t j = 0;
      for (; j + L <= V; j += L) {
        const auto s = hn::Mul(hn::LoadU(d, r + j), vd);
        hn::StoreU(s, d, r + j);
        hn::StoreU(hn::MulAdd(vk, s, hn::LoadU(d, sk.data() + j)), d, sk.data() + j);
      }
      for (; j < V; ++j) {
        r[j] *= dec;
        sk[j] = std::fma(kt[i], r[j], sk[j]);
      }
    }
    for (size_t j = 0; j < V; ++j) sk[j] = b * (vr[j] - sk[j]);  // v'
    // S += k v'^T, and S^T q.
    for (size_t i = 0; i < static_cast<size_t>(k_dim); ++i) {
      float* r = S + i * V;
      const auto vk = hn::Set(d, kt[i]), vq = hn::Set(d, qt[i]);
      size_t j = 0;
      for (; j + L <= V; j += L) {
        const auto s = hn::MulAdd(vk, hn::LoadU(d, sk.data() + j), hn::LoadU(d, r + j));
        hn::StoreU(s, d, r + j);
        hn::StoreU(hn::MulAdd(vq, s, hn::LoadU(d, acc.data() + j)), d, acc.data() + j);
      }
      for (; j < V; ++j) {
        r[j] = std::fma(kt[i], sk[j], r[j]);
        acc[j] = std::fma(qt[i], r[j], acc[j]);
      }
    }
    float* o = out + t * out_stride;
    for (size_t j = 0; j < V; ++j) o[j] = acc[j] * scale;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ork::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ork::cpu {

HWY_EXPORT(ShortConv);
HWY_EXPORT(ConvSilu);
HWY_EXPORT(DeltaRule);

void conv_silu(const float* x, int n, int width, const float* w, int taps, const float* history, float* out) {
  HWY_DYNAMIC_DISPATCH(ConvSilu)(x, n, width, w, taps, history, out);
}

void delta_rule(float* S, int k_dim, int v_dim, int n, const float* q, const float* k, const float* v, int64_t stride,
                const float* beta, const float* decay, int64_t gate_stride, float scale, float* out,
                int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(DeltaRule)(S, k_dim, v_dim, n, q, k, v, stride, beta, decay, gate_stride, scale, out, out_stride);
}

void short_conv(const float* bcx, int n, int width, const float* w, int taps, const float* history, float* u,
                float* out) {
  HWY_DYNAMIC_DISPATCH(ShortConv)(bcx, n, width, w, taps, history, u, out);
}

}  // namespace ork::cpu
#endif  // HWY_ONCE
