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

// sum_i a[i] b[i]: a vector of partial sums, then the tail one at a time.
HWY_INLINE float Dot(const float* a, const float* b, int n) {
  const DF d;
  const auto N = static_cast<size_t>(n);
  const size_t L = hn::Lanes(d);
  auto acc = hn::Zero(d);
  size_t i = 0;
  for (; i + L <= N; i += L) acc = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), acc);
  float sum = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; i < N; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

HWY_INLINE float InverseL2(const float* x, int n) { return 1.0f / std::max(std::sqrt(Dot(x, x, n)), 1e-6f); }

// Vectors of columns a block: eight (sixteen sums and eight loads) where the
// target has 32 vector registers - a 128-wide state's whole row with
// AVX-512, so the first pass reads the state in order - four on x86 below
// AVX-512 (sixteen registers).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kDeltaVectors = 4;
#else
constexpr int kDeltaVectors = 8;
#endif

// One token of the delta rule over the state's columns [j0, j0 + C*L) (C
// vectors of L), reading the state twice and writing it once. With
// S' = decay S + k v'^T and v' = beta (v - decay S^T k):
//   pass 1 (read only):  S^T k and S^T q together,
//   then                 v', and S'^T q = decay S^T q + v' (k . q),
//   pass 2:              S = decay S + k v'^T.
// The products accumulate in registers, a column block at a time, so the
// second pass finds the block in L1.
template <int C>
HWY_INLINE void DeltaColumns(float* S, size_t V, int k_dim, size_t j0, const float* kt, const float* qt, float kq,
                             float dec, float b, const float* vr, float scale, float* o) {
  const DF d;
  const size_t L = hn::Lanes(d);
  using V_ = hn::Vec<DF>;
  V_ sk[C], sq[C];
  for (int c = 0; c < C; ++c) sk[c] = sq[c] = hn::Zero(d);
  for (size_t i = 0; i < static_cast<size_t>(k_dim); ++i) {
    const float* r = S + i * V + j0;
    const V_ vk = hn::Set(d, kt[i]), vq = hn::Set(d, qt[i]);
    for (int c = 0; c < C; ++c) {
      const V_ s = hn::LoadU(d, r + static_cast<size_t>(c) * L);
      sk[c] = hn::MulAdd(vk, s, sk[c]);
      sq[c] = hn::MulAdd(vq, s, sq[c]);
    }
  }
  const V_ vd = hn::Set(d, dec), vb = hn::Set(d, b), vkq = hn::Set(d, kq), vs = hn::Set(d, scale);
  V_ nv[C];  // v'
  for (int c = 0; c < C; ++c) {
    const size_t j = j0 + static_cast<size_t>(c) * L;
    nv[c] = hn::Mul(vb, hn::NegMulAdd(vd, sk[c], hn::LoadU(d, vr + j)));
    hn::StoreU(hn::Mul(vs, hn::MulAdd(vkq, nv[c], hn::Mul(vd, sq[c]))), d, o + j);
  }
  for (size_t i = 0; i < static_cast<size_t>(k_dim); ++i) {
    float* r = S + i * V + j0;
    const V_ vk = hn::Set(d, kt[i]);
    for (int c = 0; c < C; ++c) {
      float* p = r + static_cast<size_t>(c) * L;
      hn::StoreU(hn::MulAdd(vk, nv[c], hn::Mul(vd, hn::LoadU(d, p))), d, p);
    }
  }
}

void DeltaRule(float* S, int k_dim, int v_dim, int n, const float* q, const float* k, const float* v, int64_t stride,
               const float* beta, const float* decay, int64_t gate_stride, float scale, float* out,
               int64_t out_stride) {
  const DF d;
  const auto V = static_cast<size_t>(v_dim);
  const size_t L = hn::Lanes(d);
  thread_local std::vector<float> kt, qt;
  kt.resize(static_cast<size_t>(k_dim));
  qt.resize(static_cast<size_t>(k_dim));
  for (int t = 0; t < n; ++t) {
    const float* qr = q + t * stride;
    const float* kr = k + t * stride;
    const float* vr = v + t * stride;
    const float qn = InverseL2(qr, k_dim), kn = InverseL2(kr, k_dim);
    for (int i = 0; i < k_dim; ++i) {
      qt[static_cast<size_t>(i)] = qr[i] * qn;
      kt[static_cast<size_t>(i)] = kr[i] * kn;
    }
    const float kq = Dot(kt.data(), qt.data(), k_dim);
    const float dec = decay[t * gate_stride], b = beta[t * gate_stride];
    float* o = out + t * out_stride;
    size_t j = 0;
    for (; j + kDeltaVectors * L <= V; j += kDeltaVectors * L) {
      DeltaColumns<kDeltaVectors>(S, V, k_dim, j, kt.data(), qt.data(), kq, dec, b, vr, scale, o);
    }
    for (; j + L <= V; j += L) DeltaColumns<1>(S, V, k_dim, j, kt.data(), qt.data(), kq, dec, b, vr, scale, o);
    for (; j < V; ++j) {  // the columns past the last whole vector, one at a time the same way
      float sk = 0.0f, sq = 0.0f;
      for (size_t i = 0; i < static_cast<size_t>(k_dim); ++i) {
        sk = std::fma(kt[i], S[i * V + j], sk);
        sq = std::fma(qt[i], S[i * V + j], sq);
      }
      const float nv = b * std::fma(-dec, sk, vr[j]);
      o[j] = scale * std::fma(kq, nv, dec * sq);
      for (size_t i = 0; i < static_cast<size_t>(k_dim); ++i) S[i * V + j] = std::fma(kt[i], nv, dec * S[i * V + j]);
    }
  }
}


// Rows of C a tile of SmallGemm takes: eight where the target has 32
// vector registers (sixteen sums, two B vectors and a broadcast), four on
// x86 below AVX-512 (sixteen registers).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kGemmRows = 4;
#else
constexpr int kGemmRows = 8;
#endif

// C[i][j..j+W L) = keep C[i][j..j+W L) + sum_r A[i][r] B[r][j..j+W L) for R
// rows i from A and C: each B load feeds R FMAs (keep 0: C is not read).
template <int R, int W>
HWY_INLINE void GemmTile(int K, const float* A, size_t lda, const float* B, size_t ldb, float* C, size_t ldc,
                         size_t j, float keep) {
  const DF d;
  const size_t L = hn::Lanes(d);
  using Vec = hn::Vec<DF>;
  Vec s[R][W];
  for (int ii = 0; ii < R; ++ii) {
    for (int h = 0; h < W; ++h) s[ii][h] = hn::Zero(d);
  }
  for (int r = 0; r < K; ++r) {
    const float* b = B + static_cast<size_t>(r) * ldb + j;
    Vec bv[W];
    for (int h = 0; h < W; ++h) bv[h] = hn::LoadU(d, b + h * L);
    for (int ii = 0; ii < R; ++ii) {
      const Vec x = hn::Set(d, A[static_cast<size_t>(ii) * lda + static_cast<size_t>(r)]);
      for (int h = 0; h < W; ++h) s[ii][h] = hn::MulAdd(x, bv[h], s[ii][h]);
    }
  }
  const Vec kv = hn::Set(d, keep);
  for (int ii = 0; ii < R; ++ii) {
    float* c = C + static_cast<size_t>(ii) * ldc + j;
    for (int h = 0; h < W; ++h) {
      hn::StoreU(keep == 0.0f ? s[ii][h] : hn::MulAdd(kv, hn::LoadU(d, c + h * L), s[ii][h]), d, c + h * L);
    }
  }
}

// C[i][:] = keep C[i][:] + sum_r A[i][r] B[r][:] for i < m, over K terms and
// N columns (row-major, leading dimensions lda, ldb, ldc; keep 0: C is
// only written, 1: accumulated, else scaled first): kGemmRows rows of C at
// a time (then four, then one) against two vectors of columns (then one;
// the last N % L columns one by one).
HWY_INLINE void SmallGemm(int m, int N, int K, const float* A, size_t lda, const float* B, size_t ldb, float* C,
                          size_t ldc, float keep) {
  const DF d;
  const auto L = static_cast<int>(hn::Lanes(d));
  auto one = [&](int i, int j) {  // C[i][j] alone (the tails)
    const float* a = A + static_cast<size_t>(i) * lda;
    float acc = 0.0f;
    for (int r = 0; r < K; ++r) acc = std::fma(a[r], B[static_cast<size_t>(r) * ldb + j], acc);
    float& c = C[static_cast<size_t>(i) * ldc + j];
    c = keep == 0.0f ? acc : std::fma(keep, c, acc);
  };
  const int n2 = N / (2 * L) * (2 * L), n1 = N / L * L;
  auto rows = [&]<int R>(int i) {
    const float* a = A + static_cast<size_t>(i) * lda;
    float* c = C + static_cast<size_t>(i) * ldc;
    for (int j = 0; j < n2; j += 2 * L) GemmTile<R, 2>(K, a, lda, B, ldb, c, ldc, static_cast<size_t>(j), keep);
    if (n1 > n2) GemmTile<R, 1>(K, a, lda, B, ldb, c, ldc, static_cast<size_t>(n2), keep);
    for (int j = n1; j < N; ++j) {
      for (int ii = 0; ii < R; ++ii) one(i + ii, j);
    }
  };
  int i = 0;
  for (; i + kGemmRows <= m; i += kGemmRows) rows.template operator()<kGemmRows>(i);
  if constexpr (kGemmRows > 4) {
    for (; i + 4 <= m; i += 4) rows.template operator()<4>(i);
  }
  for (; i < m; ++i) rows.template operator()<1>(i);
}

// The delta rule over chunks of kDeltaChunk tokens (recurrent_ops.h). With
// g_i the cumulative decay from the chunk's start state S0 to token i:
//   u_i = beta_i (v_i - g_i S0^T k_i) - beta_i sum_{j<i} (g_i/g_j)(k_i.k_j) u_j
//   o_i = scale (g_i S0^T q_i + sum_{j<=i} (g_i/g_j)(q_i.k_j) u_j)
//   S   = g_last S0 + sum_j (g_last/g_j) k_j u_j^T
// which is the recurrence unrolled: its state products become matrix
// products, the state read twice per chunk (once for K S0 and Q S0 together,
// once to update it) instead of twice per token.
void DeltaRuleChunked(float* S, int k_dim, int v_dim, int n, const float* q, const float* k, const float* v,
                      int64_t stride, const float* beta, const float* decay, int64_t gate_stride, float scale,
                      float* out, int64_t out_stride) {
  const DF d;
  const auto Kd = static_cast<size_t>(k_dim), V = static_cast<size_t>(v_dim);
  const size_t L = hn::Lanes(d);
  constexpr int C = kDeltaChunk;
  // The chunk's normalized keys and queries stacked (k rows, then q rows),
  // so one product with the state gives both w and qs, below them in wq.
  thread_local std::vector<float> kq, kt, wq, u, g, lg, ratio, gam;
  kq.resize(2 * C * Kd);
  kt.resize(Kd * C);
  wq.resize(2 * C * V);
  u.resize(C * V);
  g.resize(C * C);
  lg.resize(C);
  ratio.resize(C * C);  // [i][j]: g_i / g_j, j <= i
  gam.resize(C);        // g_i
  for (int c0 = 0; c0 < n; c0 += C) {
    const int m = std::min(C, n - c0);
    const auto um = static_cast<size_t>(m);
    float* const kc = kq.data();
    float* const qc = kc + um * Kd;
    float* const w = wq.data();
    float* const qs = w + um * V;
    float cum = 0.0f;
    for (size_t i = 0; i < um; ++i) {
      const int64_t t = c0 + static_cast<int64_t>(i);
      const float* qr = q + t * stride;
      const float* kr = k + t * stride;
      const float qn = InverseL2(qr, k_dim), kn = InverseL2(kr, k_dim);
      for (size_t r = 0; r < Kd; ++r) {
        qc[i * Kd + r] = qr[r] * qn;
        kc[i * Kd + r] = kr[r] * kn;
        kt[r * C + i] = kc[i * Kd + r];
      }
      cum += std::log(std::max(decay[t * gate_stride], 1e-30f));
      lg[i] = cum;
    }
    // The decays, once a chunk: from its start to each token, and between tokens.
    for (size_t i = 0; i < um; ++i) {
      gam[i] = std::exp(lg[i]);
      for (size_t p = 0; p <= i; ++p) ratio[i * C + p] = std::exp(lg[i] - lg[p]);
    }
    // w = K S0, qs = Q S0 (the chunk's view of the state it starts from).
    SmallGemm(2 * m, v_dim, k_dim, kc, Kd, S, V, w, V, 0.0f);
    // u, row by row: r_i = beta_i (v_i - g_i w_i) less the earlier rows.
    SmallGemm(m, m, k_dim, kc, Kd, kt.data(), C, g.data(), C, 0.0f);  // k_i . k_j
    for (size_t i = 0; i < um; ++i) {
      const int64_t t = c0 + static_cast<int64_t>(i);
      const float b = beta[t * gate_stride], gi = gam[i];
      const float* vr = v + t * stride;
      float* ui = &u[i * V];
      const auto vb = hn::Set(d, b), vg = hn::Set(d, gi);
      size_t j = 0;
      for (; j + L <= V; j += L) {
        hn::StoreU(hn::Mul(vb, hn::NegMulAdd(vg, hn::LoadU(d, &w[i * V + j]), hn::LoadU(d, vr + j))), d, ui + j);
      }
      for (; j < V; ++j) ui[j] = b * (vr[j] - gi * w[i * V + j]);
      for (size_t p = 0; p < i; ++p) {
        const float av = b * ratio[i * C + p] * g[i * C + p];
        const auto a = hn::Set(d, av);
        const float* up = &u[p * V];
        size_t jj = 0;
        for (; jj + L <= V; jj += L) hn::StoreU(hn::NegMulAdd(a, hn::LoadU(d, up + jj), hn::LoadU(d, ui + jj)), d, ui + jj);
        for (; jj < V; ++jj) ui[jj] -= av * up[jj];
      }
    }
    // o = scale (g qs + P u), P_ij = (g_i/g_j)(q_i.k_j) for j <= i.
    SmallGemm(m, m, k_dim, qc, Kd, kt.data(), C, g.data(), C, 0.0f);  // q_i . k_j
    for (size_t i = 0; i < um; ++i) {
      for (size_t p = 0; p < um; ++p) g[i * C + p] = p <= i ? ratio[i * C + p] * g[i * C + p] : 0.0f;
      for (size_t j = 0; j < V; ++j) qs[i * V + j] *= gam[i];
    }
    SmallGemm(m, v_dim, m, g.data(), C, u.data(), V, qs, V, 1.0f);
    for (size_t i = 0; i < um; ++i) {
      float* o = out + (c0 + static_cast<int64_t>(i)) * out_stride;
      for (size_t j = 0; j < V; ++j) o[j] = qs[i * V + j] * scale;
    }
    // S = g_last S0 + sum_j (g_last / g_j) k_j u_j^T.
    const float glast = gam[um - 1];
    for (size_t r = 0; r < Kd; ++r) {
      for (size_t i = 0; i < um; ++i) kt[r * C + i] *= ratio[(um - 1) * C + i];
    }
    SmallGemm(k_dim, v_dim, m, kt.data(), C, u.data(), V, S, V, glast);
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
HWY_EXPORT(DeltaRuleChunked);

void conv_silu(const float* x, int n, int width, const float* w, int taps, const float* history, float* out) {
  HWY_DYNAMIC_DISPATCH(ConvSilu)(x, n, width, w, taps, history, out);
}

void delta_rule(float* S, int k_dim, int v_dim, int n, const float* q, const float* k, const float* v, int64_t stride,
                const float* beta, const float* decay, int64_t gate_stride, float scale, float* out,
                int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(DeltaRule)(S, k_dim, v_dim, n, q, k, v, stride, beta, decay, gate_stride, scale, out, out_stride);
}

void delta_rule_chunked(float* S, int k_dim, int v_dim, int n, const float* q, const float* k, const float* v,
                        int64_t stride, const float* beta, const float* decay, int64_t gate_stride, float scale,
                        float* out, int64_t out_stride) {
  HWY_DYNAMIC_DISPATCH(DeltaRuleChunked)(S, k_dim, v_dim, n, q, k, v, stride, beta, decay, gate_stride, scale, out,
                                         out_stride);
}

void short_conv(const float* bcx, int n, int width, const float* w, int taps, const float* history, float* u,
                float* out) {
  HWY_DYNAMIC_DISPATCH(ShortConv)(bcx, n, width, w, taps, history, u, out);
}

}  // namespace ork::cpu
#endif  // HWY_ONCE
