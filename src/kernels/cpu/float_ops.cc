// Float kernels of the CPU engine. Loops run on full vectors with a scalar
// tail; sums keep several accumulators so the adds pipeline.
#include "kernels/cpu/float_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/float_ops.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include "core/half.h"
#include "kernels/cpu/decode_prefetch.h"

HWY_BEFORE_NAMESPACE();
namespace ork::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DH = hn::Rebind<hwy::float16_t, DF>;  // half as many bytes per lane

HWY_INLINE hn::Vec<DF> LoadF16(const uint16_t* p) {
  return hn::PromoteTo(DF(), hn::LoadU(DH(), reinterpret_cast<const hwy::float16_t*>(p)));
}

// ---------------------------------------------------------------------------

// One butterfly stage over N vectors in registers: v[m] and v[m + S] for
// every m with bit S clear (compile-time indices, so nothing spills).
template <int N, int S, int M = 0>
HWY_INLINE void RegisterStage(hn::Vec<DF>* v) {
  if constexpr (M < N) {
    if constexpr ((M & S) == 0) {
      const auto a = v[M], c = v[M + S];
      v[M] = hn::Add(a, c);
      v[M + S] = hn::Sub(a, c);
    }
    RegisterStage<N, S, M + 1>(v);
  }
}

template <int N, int S = 1>
HWY_INLINE void RegisterStages(hn::Vec<DF>* v) {
  if constexpr (S < N) {
    RegisterStage<N, S>(v);
    RegisterStages<N, 2 * S>(v);
  }
}

// S butterfly stages (distances h, 2h, ... 2^(S-1) h) at once over each set
// of 2^S vectors h apart, held in registers: the same additions in the
// same order as S passes over memory, so the same bits, with one load and
// one store per value instead of S (2.2x faster on 2048 values than a pass
// per stage). `scale` (the last group) multiplies each result before it is
// stored, as a pass of its own would.
template <int S>
HWY_INLINE void ButterflyGroup(float* xb, int block, int h, const float* scale) {
  const DF d;
  const int L = static_cast<int>(hn::Lanes(d));
  constexpr int N = 1 << S;
  for (int i = 0; i < block; i += N * h) {
    for (int q = i; q < i + h; q += L) {
      hn::Vec<DF> v[N];
      for (int j = 0; j < N; ++j) v[j] = hn::LoadU(d, xb + q + j * h);
      RegisterStages<N>(v);
      if (scale != nullptr) {
        const auto vn = hn::Set(d, *scale);
        for (int j = 0; j < N; ++j) v[j] = hn::Mul(v[j], vn);
      }
      for (int j = 0; j < N; ++j) hn::StoreU(v[j], d, xb + q + j * h);
    }
  }
}

void Rotate(float* x, int64_t k, int block, const float* signs) {
  const DF d;
  const auto L = static_cast<int64_t>(hn::Lanes(d));
  constexpr int kLanes = static_cast<int>(hn::MaxLanes(d));
  // Blocks of at least a vector take their signs in the first pass below.
  const bool in_vector = HWY_TARGET != HWY_SCALAR && kLanes >= 4 && block >= L;
  if (!in_vector) {
    for (int64_t j = 0; j < k; ++j) x[j] *= signs[j];
  }
  const float norm = 1.0f / std::sqrt(static_cast<float>(block));
  for (int64_t b = 0; b < k; b += block) {
    float* xb = x + b;
    int h = 1;
#if HWY_TARGET != HWY_SCALAR
    // The signs, then butterflies between lanes of one vector (h = 1, 2
    // and, with 8 or more lanes, 4) by swapping lanes: a + c where the
    // lower partner sits, the swapped value minus its own where the upper
    // one does, which are the same two float operations the scalar loop
    // does, so the same bits.
    if (in_vector) {
      const hn::RebindToSigned<DF> di;
      const auto lane = hn::Iota(di, 0);
      const auto upper2 = hn::RebindMask(d, hn::TestBit(lane, hn::Set(di, 2)));
      const auto upper4 = hn::RebindMask(d, hn::TestBit(lane, hn::Set(di, 4)));
      for (int q = 0; q < block; q += static_cast<int>(L)) {
        auto v = hn::Mul(hn::LoadU(d, xb + q), hn::LoadU(d, signs + b + q));
        auto s = hn::Shuffle2301(v);
        v = hn::OddEven(hn::Sub(s, v), hn::Add(v, s));
        s = hn::Shuffle1032(v);
        v = hn::IfThenElse(upper2, hn::Sub(s, v), hn::Add(v, s));
        if constexpr (kLanes >= 8) {
          s = hn::SwapAdjacentBlocks(v);
          v = hn::IfThenElse(upper4, hn::Sub(s, v), hn::Add(v, s));
        }
        hn::StoreU(v, d, xb + q);
      }
      h = std::min(kLanes, 8);
    }
#endif
    // The rest of the in-vector passes (all of them on short blocks): scalar.
    for (; h < block && h < L; h *= 2) {
      for (int i = 0; i < block; i += 2 * h) {
        for (int q = i; q < i + h; ++q) {
          const float a = xb[q], c = xb[q + h];
          xb[q] = a + c;
          xb[q + h] = a - c;
        }
      }
    }
    if (h >= block) {
      const auto vn = hn::Set(d, norm);
      int q = 0;
      for (; q + L <= block; q += static_cast<int>(L)) hn::StoreU(hn::Mul(hn::LoadU(d, xb + q), vn), d, xb + q);
      for (; q < block; ++q) xb[q] *= norm;
      continue;
    }
    // Between vectors: three stages per pass over the block while three or
    // more are left, then the last one or two with the scaling.
    int left = 0;
    for (int r = h; r < block; r *= 2) ++left;
    for (; left > 0; left -= std::min(left, 3)) {
      const float* scale = left <= 3 ? &norm : nullptr;
      if (left >= 3) {
        ButterflyGroup<3>(xb, block, h, scale);
        h *= 8;
      } else if (left == 2) {
        ButterflyGroup<2>(xb, block, h, scale);
        h *= 4;
      } else {
        ButterflyGroup<1>(xb, block, h, scale);
        h *= 2;
      }
    }
  }
}

// ---------------------------------------------------------------------------

// bf16 is the top half of an f32: widening is a 16-bit shift.
HWY_INLINE hn::Vec<DF> LoadBf16(const uint16_t* p) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  return hn::BitCast(DF(), hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
}

template <FloatWeights kKind>
HWY_INLINE hn::Vec<DF> LoadW(const void* w, int64_t at) {
  if constexpr (kKind == FloatWeights::kF16) return LoadF16(static_cast<const uint16_t*>(w) + at);
  if constexpr (kKind == FloatWeights::kBf16) return LoadBf16(static_cast<const uint16_t*>(w) + at);
  if constexpr (kKind == FloatWeights::kF32) return hn::LoadU(DF(), static_cast<const float*>(w) + at);
}

template <FloatWeights kKind>
constexpr int64_t kWeightBytes = kKind == FloatWeights::kF32 ? 4 : 2;

template <FloatWeights kKind>
HWY_INLINE float LoadWScalar(const void* w, int64_t at) {
  if constexpr (kKind == FloatWeights::kF16) return f16_to_f32(static_cast<const uint16_t*>(w)[at]);
  if constexpr (kKind == FloatWeights::kBf16) return bf16_to_f32(static_cast<const uint16_t*>(w)[at]);
  if constexpr (kKind == FloatWeights::kF32) return static_cast<const float*>(w)[at];
}

// Rows one at a time against one token: one FMA chain a row, then the
// last k % L terms in order.
template <FloatWeights kKind>
void FloatRowsAlone(const void* w, int64_t k, const float* xt, float* yt, int64_t row_begin, int64_t row_end) {
  const DF d;
  const auto L = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = row_begin; r < row_end; ++r) {
    auto a0 = hn::Zero(d);
    int64_t j = 0;
    for (; j + L <= k; j += L) a0 = hn::MulAdd(LoadW<kKind>(w, r * k + j), hn::LoadU(d, xt + j), a0);
    float s = hn::GetLane(hn::SumOfLanes(d, a0));
    for (; j < k; ++j) s += LoadWScalar<kKind>(w, r * k + j) * xt[j];
    yt[r] = s;
  }
}

// Four rows at a time against T tokens: four independent FMA chains a
// token, the rows a quarter of the range apart, so the weights stream in
// four long sequential runs the hardware prefetcher follows (as the
// quantized decode tile does with two: quant_matmul.cc). llama-1b in f32
// (4.15 GB per token), alternating `ork bench -p 0 -n 8 -r 3` runs against
// four adjacent rows: 82.4, 86.1, 89.8, 86.8 -> 97.4, 90.6, 97.4, 111.0 %
// of the probe (this VM's probe is noisy; the tok/s moved less, 0-3 %).
// Several tokens (T > 1) load and widen each weight vector once for all of
// them. Each (row, token) keeps its one accumulator and order, so any T
// and any split of the rows give the same bits; the last rows go alone.
// One token (decode) prefetches its four streams as the quantized decode
// does (DecodeStreamPrefetch): a MoE's router, 1 MB of bf16 a layer read
// cold after the experts, had read at 0.64 of the probe at two threads (the
// 12-layer qwen3.6, Zen 4, session 52).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kFloatTokens = 2;  // sixteen vector registers: 8 sums, 4 rows, 1 token
#else
constexpr int kFloatTokens = 4;  // 16 sums, 4 rows, 1 token of 32 registers
#endif

template <FloatWeights kKind, int T>
void FloatRowsOfTokens(const void* w, int64_t k, const float* x, float* y, int64_t ldy, int64_t row_begin,
                       int64_t row_end) {
  const DF d;
  const auto L = static_cast<int64_t>(hn::Lanes(d));
  using Vec = hn::Vec<DF>;
  const int64_t q = (row_end - row_begin) / 4;
  for (int64_t r = row_begin; r < row_begin + q; ++r) {
    Vec acc[4][T];
    for (int i = 0; i < 4; ++i) {
      for (int t = 0; t < T; ++t) acc[i][t] = hn::Zero(d);
    }
    int64_t j = 0;
    for (; j + L <= k; j += L) {
#if !HWY_HAVE_SCALABLE
      if constexpr (T == 1) {
        constexpr int64_t kStep = static_cast<int64_t>(hn::MaxLanes(DF())) * kWeightBytes<kKind>;
        for (int i = 0; i < 4; ++i) {
          DecodeStreamPrefetch<kStep>(static_cast<const uint8_t*>(w) + (r + i * q) * k * kWeightBytes<kKind>, j / L,
                                      kDecodeNearBytes / 4, kDecodeWindowBytes / 4);
        }
      }
#endif
      Vec wv[4];
      for (int i = 0; i < 4; ++i) wv[i] = LoadW<kKind>(w, (r + i * q) * k + j);
      for (int t = 0; t < T; ++t) {
        const Vec xv = hn::LoadU(d, x + t * k + j);
        for (int i = 0; i < 4; ++i) acc[i][t] = hn::MulAdd(wv[i], xv, acc[i][t]);
      }
    }
    for (int t = 0; t < T; ++t) {
      const float* xt = x + t * k;
      float s[4];
      for (int i = 0; i < 4; ++i) s[i] = hn::GetLane(hn::SumOfLanes(d, acc[i][t]));
      for (int64_t jj = j; jj < k; ++jj) {
        for (int i = 0; i < 4; ++i) s[i] += LoadWScalar<kKind>(w, (r + i * q) * k + jj) * xt[jj];
      }
      for (int i = 0; i < 4; ++i) y[t * ldy + r + i * q] = s[i];
    }
  }
  for (int t = 0; t < T; ++t) FloatRowsAlone<kKind>(w, k, x + t * k, y + t * ldy, row_begin + 4 * q, row_end);
}

// Several tokens: the rows in blocks that stay in L2 (<= 128 KiB), each
// block against every token - a token at a time over the whole range read
// the weights from memory or L3 once per token (a MoE router's 2 MiB of
// f32, 512 times in a 512-token prefill). The same sums in the same order.
template <FloatWeights kKind>
void FloatMatmulOf(const void* w, int64_t k, const float* x, int n, float* y, int64_t ldy, int64_t row_begin,
                   int64_t row_end) {
  const int64_t block = n == 1 ? row_end - row_begin
                               : std::max<int64_t>(4, (int64_t{128} << 10) / (k * kWeightBytes<kKind>) / 4 * 4);
  for (int64_t b = row_begin; b < row_end; b += block) {
    const int64_t e = std::min(row_end, b + block);
    int t = 0;
    for (; t + kFloatTokens <= n; t += kFloatTokens) {
      FloatRowsOfTokens<kKind, kFloatTokens>(w, k, x + t * k, y + t * ldy, ldy, b, e);
    }
    for (; t < n; ++t) FloatRowsOfTokens<kKind, 1>(w, k, x + t * k, y + t * ldy, ldy, b, e);
  }
}

void FloatMatmul(FloatWeights kind, const void* w, int64_t k, const float* x, int n, float* y, int64_t ldy,
                 int64_t row_begin, int64_t row_end) {
  switch (kind) {
    case FloatWeights::kF32: return FloatMatmulOf<FloatWeights::kF32>(w, k, x, n, y, ldy, row_begin, row_end);
    case FloatWeights::kF16: return FloatMatmulOf<FloatWeights::kF16>(w, k, x, n, y, ldy, row_begin, row_end);
    case FloatWeights::kBf16: return FloatMatmulOf<FloatWeights::kBf16>(w, k, x, n, y, ldy, row_begin, row_end);
  }
}

// ---------------------------------------------------------------------------

HWY_INLINE float SumSquares(const float* x, int64_t n) {
  const DF d;
  const auto L = static_cast<int64_t>(hn::Lanes(d));
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    const auto a = hn::LoadU(d, x + i), b = hn::LoadU(d, x + i + L);
    s0 = hn::MulAdd(a, a, s0);
    s1 = hn::MulAdd(b, b, s1);
  }
  for (; i + L <= n; i += L) {
    const auto a = hn::LoadU(d, x + i);
    s0 = hn::MulAdd(a, a, s0);
  }
  float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  const DF d;
  const auto L = static_cast<int64_t>(hn::Lanes(d));
  const float scale = 1.0f / std::sqrt(SumSquares(x, n) / static_cast<float>(n) + eps);
  const auto vs = hn::Set(d, scale);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + i), vs), hn::LoadU(d, weight + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void Rope(float* head, int n_rot, bool adjacent, const float* cos, const float* sin) {
  const int half = n_rot / 2;
  if (adjacent) {
    for (int i = 0; i < half; ++i) {
      const float x0 = head[2 * i], x1 = head[2 * i + 1];
      head[2 * i] = x0 * cos[i] - x1 * sin[i];
      head[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
    }
    return;
  }
  const DF d;
  const auto L = static_cast<int>(hn::Lanes(d));
  int i = 0;
  for (; i + L <= half; i += L) {
    const auto x0 = hn::LoadU(d, head + i), x1 = hn::LoadU(d, head + half + i);
    const auto c = hn::LoadU(d, cos + i), s = hn::LoadU(d, sin + i);
    hn::StoreU(hn::Sub(hn::Mul(x0, c), hn::Mul(x1, s)), d, head + i);
    hn::StoreU(hn::Add(hn::Mul(x0, s), hn::Mul(x1, c)), d, head + half + i);
  }
  for (; i < half; ++i) {
    const float x0 = head[i], x1 = head[half + i];
    head[i] = x0 * cos[i] - x1 * sin[i];
    head[half + i] = x0 * sin[i] + x1 * cos[i];
  }
}

// A partial vector at the end of an array goes through a padded copy, so
// every element gets the vector's arithmetic (exp in particular) whatever
// its position: a batch and its tokens one at a time agree exactly.
constexpr size_t kMaxFloatLanes = HWY_MAX_BYTES / sizeof(float);

HWY_INLINE hn::Vec<DF> SwigluVec(hn::Vec<DF> g, hn::Vec<DF> u) {
  const DF d;
  return hn::Mul(hn::Div(g, hn::Add(hn::Set(d, 1.0f), hn::Exp(d, hn::Neg(g)))), u);
}

HWY_INLINE hn::Vec<DF> GegluVec(hn::Vec<DF> g, hn::Vec<DF> u) {
  const DF d;
  const auto inner = hn::Mul(hn::Set(d, 0.7978845608f), hn::MulAdd(hn::Mul(hn::Set(d, 0.044715f), g), hn::Mul(g, g), g));
  const auto half_g = hn::Mul(hn::Set(d, 0.5f), g);
  return hn::Mul(hn::MulAdd(half_g, hn::Tanh(d, inner), half_g), u);
}

// out = glu(gate) * up over n values, the tail through one padded vector.
template <class Glu>
HWY_INLINE void GatedUnit(const float* gate, const float* up, int64_t n, float* out, Glu glu) {
  const DF d;
  const auto L = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(glu(hn::LoadU(d, gate + i), hn::LoadU(d, up + i)), d, out + i);
  if (i < n) {
    alignas(64) float g[kMaxFloatLanes] = {}, u[kMaxFloatLanes] = {};
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    hn::Store(glu(hn::Load(d, g), hn::Load(d, u)), d, g);
    std::copy(g, g + (n - i), out + i);
  }
}

void Swiglu(const float* gate, const float* up, int64_t n, float* out) {
  GatedUnit(gate, up, n, out, [](auto g, auto u) HWY_ATTR { return SwigluVec(g, u); });
}

void Geglu(const float* gate, const float* up, int64_t n, float* out) {
  GatedUnit(gate, up, n, out, [](auto g, auto u) HWY_ATTR { return GegluVec(g, u); });
}

void ToF16(const float* x, int64_t n, uint16_t* out) {
  const DF d;
  const DH dh;
  const auto L = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    hn::StoreU(hn::DemoteTo(dh, hn::LoadU(d, x + i)), dh, reinterpret_cast<hwy::float16_t*>(out + i));
  }
  for (; i < n; ++i) out[i] = f32_to_f16(x[i]);
}

HWY_INLINE float DotF16(const float* q, const uint16_t* k, int head_dim) {
  const DF d;
  const auto L = static_cast<int>(hn::Lanes(d));
  auto acc = hn::Zero(d);
  int i = 0;
  for (; i + L <= head_dim; i += L) acc = hn::MulAdd(hn::LoadU(d, q + i), LoadF16(k + i), acc);
  float dot = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; i < head_dim; ++i) dot += q[i] * f16_to_f32(k[i]);
  return dot;
}

// exp(s - max) in place over n scores; returns 1 / their sum.
HWY_INLINE float SoftmaxNumerators(float* scores, int64_t n_kv) {
  const DF d;
  const auto L = static_cast<int>(hn::Lanes(d));
  // The maximum, vector-wide (a scalar loop is one dependent compare per
  // score: 6-7 % of a group's attention at 1024 positions).
  auto vm = hn::Set(d, -INFINITY);
  int64_t m = 0;
  for (; m + L <= n_kv; m += L) vm = hn::Max(vm, hn::LoadU(d, scores + m));
  float max = hn::GetLane(hn::MaxOfLanes(d, vm));
  for (; m < n_kv; ++m) max = std::max(max, scores[m]);
  const auto vmax = hn::Set(d, max);
  auto vsum = hn::Zero(d);
  int64_t t = 0;
  for (; t + L <= n_kv; t += L) {
    const auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, scores + t), vmax));
    hn::StoreU(e, d, scores + t);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  if (t < n_kv) {
    alignas(64) float e[kMaxFloatLanes];
    std::fill(e, e + kMaxFloatLanes, max);
    std::copy(scores + t, scores + n_kv, e);
    hn::Store(hn::Exp(d, hn::Sub(hn::Load(d, e), vmax)), d, e);
    for (; t < n_kv; ++t) {
      scores[t] = e[t % L];
      sum += scores[t];
    }
  }
  return 1.0f / sum;
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const DF d;
  const auto L = static_cast<int64_t>(hn::Lanes(d));
  const float inv = SoftmaxNumerators(x, n);
  const auto vi = hn::Set(d, inv);
  int64_t i = 0;
  for (; i + L <= n; i += L) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vi), d, x + i);
  for (; i < n; ++i) x[i] *= inv;
}

// Positions per block of the V pass: 64 rows of a 128-wide f16 head are
// 16 KiB, half of L1.
constexpr int64_t kVBlock = 64;

// Attention scores are dot products summed across a vector's lanes. One
// SumOfLanes per score (a chain of shuffles and adds) cost nearly half as
// much as the score's multiply-adds; four scores are summed together
// instead, with the shuffles shared (SumsOf4). Every score, alone or in a
// four, is summed in the same order: (l0 + l2) + (l1 + l3) within each
// 128-bit block of its vector, then the blocks' sums, lower half plus upper
// half.
#if HWY_TARGET != HWY_SCALAR
using D4 = hn::Full128<float>;

template <class D>
HWY_INLINE hn::Vec<D4> FoldTo128(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(d) <= 4) {
    return v;
  } else {
    const hn::Half<D> dh;
    return FoldTo128(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
}

// Lane j: the sum of a_j's lanes.
HWY_INLINE hn::Vec<D4> SumsOf4(hn::Vec<DF> a0, hn::Vec<DF> a1, hn::Vec<DF> a2, hn::Vec<DF> a3) {
  const DF d;
  const hn::Repartition<uint64_t, DF> d64;
  const auto t0 = hn::Add(hn::InterleaveLower(d, a0, a1), hn::InterleaveUpper(d, a0, a1));
  const auto t1 = hn::Add(hn::InterleaveLower(d, a2, a3), hn::InterleaveUpper(d, a2, a3));
  const auto u0 = hn::BitCast(d, hn::InterleaveLower(d64, hn::BitCast(d64, t0), hn::BitCast(d64, t1)));
  const auto u1 = hn::BitCast(d, hn::InterleaveUpper(d64, hn::BitCast(d64, t0), hn::BitCast(d64, t1)));
  return FoldTo128(d, hn::Add(u0, u1));
}

// scores[0..3] = the four accumulators' sums times scale.
HWY_INLINE void StoreScores4(hn::Vec<DF> a0, hn::Vec<DF> a1, hn::Vec<DF> a2, hn::Vec<DF> a3, float scale, float* scores) {
  const D4 d4;
  hn::StoreU(hn::Mul(SumsOf4(a0, a1, a2, a3), hn::Set(d4, scale)), d4, scores);
}

HWY_INLINE float ScoreOf(hn::Vec<DF> a, float scale) {
  const auto z = hn::Zero(DF());
  return hn::GetLane(SumsOf4(a, z, z, z)) * scale;
}
#else
HWY_INLINE void StoreScores4(hn::Vec<DF> a0, hn::Vec<DF> a1, hn::Vec<DF> a2, hn::Vec<DF> a3, float scale, float* scores) {
  scores[0] = hn::GetLane(a0) * scale, scores[1] = hn::GetLane(a1) * scale;
  scores[2] = hn::GetLane(a2) * scale, scores[3] = hn::GetLane(a3) * scale;
}
HWY_INLINE float ScoreOf(hn::Vec<DF> a, float scale) { return hn::GetLane(a) * scale; }
#endif

void AttentionHeadF16(const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv, int head_dim, int64_t stride,
                      float scale, float* scores, float* out) {
  const DF d;
  const auto L = static_cast<int>(hn::Lanes(d));
  // Scores, four keys at a time (four independent FMA chains).
  int64_t t = 0;
  if (head_dim % L == 0) {
    for (; t + 4 <= n_kv; t += 4) {
      const uint16_t* k0 = k + t * stride;
      auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
      for (int i = 0; i < head_dim; i += L) {
        const auto qv = hn::LoadU(d, q + i);
        a0 = hn::MulAdd(qv, LoadF16(k0 + i), a0);
        a1 = hn::MulAdd(qv, LoadF16(k0 + stride + i), a1);
        a2 = hn::MulAdd(qv, LoadF16(k0 + 2 * stride + i), a2);
        a3 = hn::MulAdd(qv, LoadF16(k0 + 3 * stride + i), a3);
      }
      StoreScores4(a0, a1, a2, a3, scale, scores + t);
    }
    for (; t < n_kv; ++t) {
      auto a = hn::Zero(d);
      for (int i = 0; i < head_dim; i += L) a = hn::MulAdd(hn::LoadU(d, q + i), LoadF16(k + t * stride + i), a);
      scores[t] = ScoreOf(a, scale);
    }
  }
  for (; t < n_kv; ++t) scores[t] = DotF16(q, k + t * stride, head_dim) * scale;
  // Softmax numerators and their sum.
  const float inv = SoftmaxNumerators(scores, n_kv);
  // out = sum_s p_s v_s: up to four vectors of the head per pass over a
  // block of positions that stays in L1 (see AttentionGroup); the sums carry
  // from block to block in `out`.
  const auto vi = hn::Set(d, inv);
  for (int64_t s0 = 0; s0 < n_kv; s0 += kVBlock) {
    const int64_t s1 = std::min(n_kv, s0 + kVBlock);
    const bool first = s0 == 0, last = s1 == n_kv;
    auto start = [&](int at) HWY_ATTR { return first ? hn::Zero(d) : hn::LoadU(d, out + at); };
    auto finish = [&](hn::Vec<DF> o, int at) HWY_ATTR { hn::StoreU(last ? hn::Mul(o, vi) : o, d, out + at); };
    int i = 0;
    for (; i + 4 * L <= head_dim; i += 4 * L) {
      auto o0 = start(i), o1 = start(i + L), o2 = start(i + 2 * L), o3 = start(i + 3 * L);
      for (int64_t s = s0; s < s1; ++s) {
        const auto p = hn::Set(d, scores[s]);
        const uint16_t* vs = v + s * stride + i;
        o0 = hn::MulAdd(p, LoadF16(vs), o0);
        o1 = hn::MulAdd(p, LoadF16(vs + L), o1);
        o2 = hn::MulAdd(p, LoadF16(vs + 2 * L), o2);
        o3 = hn::MulAdd(p, LoadF16(vs + 3 * L), o3);
      }
      finish(o0, i), finish(o1, i + L), finish(o2, i + 2 * L), finish(o3, i + 3 * L);
    }
    for (; i + L <= head_dim; i += L) {
      auto o0 = start(i);
      for (int64_t s = s0; s < s1; ++s) o0 = hn::MulAdd(hn::Set(d, scores[s]), LoadF16(v + s * stride + i), o0);
      finish(o0, i);
    }
    for (; i < head_dim; ++i) {
      float acc = first ? 0.0f : out[i];
      for (int64_t s = s0; s < s1; ++s) acc += scores[s] * f16_to_f32(v[s * stride + i]);
      out[i] = last ? acc * inv : acc;
    }
  }
}

// Rows [s0, s1) of an f16 cache into the caches: at depth the cache comes
// from DRAM and a block's work is short, so the hardware prefetcher alone
// left the passes waiting on memory (a third of the bandwidth in the model).
HWY_INLINE void PrefetchRows(const uint16_t* rows, int64_t s0, int64_t s1, int head_dim, int64_t stride) {
  for (int64_t s = s0; s < s1; ++s) {
    for (int i = 0; i < head_dim; i += 32) hwy::Prefetch(rows + s * stride + i);
  }
}

// The G query heads that share one KV head (grouped-query attention): each
// cached key and value is widened from f16 once for the whole group rather
// than once per head. Per head, every lane sees the same operations in the
// same order as AttentionHeadF16, so the results are identical.
template <int G>
void AttentionGroup(const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv, int head_dim, int64_t stride,
                    float scale, float* scores, float* out) {
  const DF d;
  const auto L = static_cast<int>(hn::Lanes(d));
  using V = hn::Vec<DF>;
  // Eight multiply-add chains in flight: a chain waits for its previous
  // FMA (4 cycles on Zen 3) and two issue per cycle, so one chain per head
  // of a four-head group ran at half speed. Scores take kHs heads times kP
  // positions per pass (each q vector then serves kP keys, each key vector
  // kHs heads: fewer loads per FMA than all eight heads of a group times
  // one key); V takes kHv heads times kS vectors of the head. Positions go
  // in blocks of kVBlock, whose K and V rows stay in L1 while every head
  // passes over them. Each lane adds in the same order as AttentionHeadF16.
  constexpr int kHs = G < 2 ? G : 2, kP = 8 / kHs;
  constexpr int kHv = G < 2 ? G : 2, kS = 8 / kHv;
  for (int64_t s0 = 0; s0 < n_kv; s0 += kVBlock) {
    const int64_t s1 = std::min(n_kv, s0 + kVBlock);
    PrefetchRows(k, s1, std::min(n_kv, s1 + kVBlock), head_dim, stride);
    for (int g0 = 0; g0 < G; g0 += kHs) {
      auto pass = [&](int64_t t, auto positions) HWY_ATTR {
        constexpr int P = decltype(positions)::value;
        V acc[P][kHs];
        for (int p = 0; p < P; ++p) {
          for (int g = 0; g < kHs; ++g) acc[p][g] = hn::Zero(d);
        }
        for (int i = 0; i < head_dim; i += L) {
          for (int p = 0; p < P; ++p) {
            const auto kv = LoadF16(k + (t + p) * stride + i);
            for (int g = 0; g < kHs; ++g) acc[p][g] = hn::MulAdd(hn::LoadU(d, q + (g0 + g) * head_dim + i), kv, acc[p][g]);
          }
        }
        for (int g = 0; g < kHs; ++g) {
          float* sg = scores + (g0 + g) * n_kv + t;
          if constexpr (P % 4 == 0) {
            for (int p = 0; p < P; p += 4) StoreScores4(acc[p][g], acc[p + 1][g], acc[p + 2][g], acc[p + 3][g], scale, sg + p);
          } else {
            for (int p = 0; p < P; ++p) sg[p] = ScoreOf(acc[p][g], scale);
          }
        }
      };
      int64_t t = s0;
      for (; t + kP <= s1; t += kP) pass(t, std::integral_constant<int, kP>());
      for (; t < s1; ++t) pass(t, std::integral_constant<int, 1>());
    }
  }
  float inv[G];
  for (int g = 0; g < G; ++g) inv[g] = SoftmaxNumerators(scores + g * n_kv, n_kv);
  // out = sum_s p_s v_s. The sums carry from block to block in `out`.
  for (int64_t s0 = 0; s0 < n_kv; s0 += kVBlock) {
    const int64_t s1 = std::min(n_kv, s0 + kVBlock);
    PrefetchRows(v, s1, std::min(n_kv, s1 + kVBlock), head_dim, stride);
    for (int g0 = 0; g0 < G; g0 += kHv) {
      auto pass = [&](int i, auto slices) HWY_ATTR {
        constexpr int S = decltype(slices)::value;
        V o[S][kHv];
        for (int j = 0; j < S; ++j) {
          for (int g = 0; g < kHv; ++g) {
            o[j][g] = s0 == 0 ? hn::Zero(d) : hn::LoadU(d, out + (g0 + g) * head_dim + i + j * L);
          }
        }
        for (int64_t s = s0; s < s1; ++s) {
          V p[kHv];
          for (int g = 0; g < kHv; ++g) p[g] = hn::Set(d, scores[(g0 + g) * n_kv + s]);
          for (int j = 0; j < S; ++j) {
            const auto vv = LoadF16(v + s * stride + i + j * L);
            for (int g = 0; g < kHv; ++g) o[j][g] = hn::MulAdd(p[g], vv, o[j][g]);
          }
        }
        for (int j = 0; j < S; ++j) {
          for (int g = 0; g < kHv; ++g) {
            hn::StoreU(s1 == n_kv ? hn::Mul(o[j][g], hn::Set(d, inv[g0 + g])) : o[j][g], d,
                       out + (g0 + g) * head_dim + i + j * L);
          }
        }
      };
      int i = 0;
      for (; i + kS * L <= head_dim; i += kS * L) pass(i, std::integral_constant<int, kS>());
      for (; i < head_dim; i += L) pass(i, std::integral_constant<int, 1>());
    }
  }
}

void AttentionGroupF16(const float* q, int group, const uint16_t* k, const uint16_t* v, int64_t n_kv, int head_dim,
                       int64_t stride, float scale, float* scores, float* out) {
  const auto L = static_cast<int>(hn::Lanes(DF()));
  if (head_dim % L == 0) {
    switch (group) {
      case 1: return AttentionGroup<1>(q, k, v, n_kv, head_dim, stride, scale, scores, out);
      case 2: return AttentionGroup<2>(q, k, v, n_kv, head_dim, stride, scale, scores, out);
      case 4: return AttentionGroup<4>(q, k, v, n_kv, head_dim, stride, scale, scores, out);
      case 8: return AttentionGroup<8>(q, k, v, n_kv, head_dim, stride, scale, scores, out);
      default: break;
    }
  }
  for (int g = 0; g < group; ++g) {
    AttentionHeadF16(q + g * head_dim, k, v, n_kv, head_dim, stride, scale, scores, out + g * head_dim);
  }
}

// `streams` equal parts read in lockstep (1, 2 or 4), each a whole number
// of steps, four independent vector sums in all so loads, not adds, set
// the pace; the words after the last part (fewer than streams steps) are
// summed one by one at the end.
uint64_t StreamRead(const uint64_t* p, int64_t words, int streams) {
  const hn::ScalableTag<uint64_t> d;
  const auto L = static_cast<int64_t>(hn::Lanes(d));
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  const int64_t step = 4 / streams * L;
  const int64_t part = words / streams / step * step;
  const uint64_t* q = p + part;
  if (streams == 4) {
    const uint64_t *u = p + 2 * part, *v = p + 3 * part;
    for (int64_t i = 0; i < part; i += L) {
      s0 = hn::Add(s0, hn::LoadU(d, p + i));
      s1 = hn::Add(s1, hn::LoadU(d, q + i));
      s2 = hn::Add(s2, hn::LoadU(d, u + i));
      s3 = hn::Add(s3, hn::LoadU(d, v + i));
    }
  } else if (streams == 2) {
    for (int64_t i = 0; i < part; i += 2 * L) {
      s0 = hn::Add(s0, hn::LoadU(d, p + i));
      s1 = hn::Add(s1, hn::LoadU(d, p + i + L));
      s2 = hn::Add(s2, hn::LoadU(d, q + i));
      s3 = hn::Add(s3, hn::LoadU(d, q + i + L));
    }
  } else {
    for (int64_t i = 0; i < part; i += 4 * L) {
      s0 = hn::Add(s0, hn::LoadU(d, p + i));
      s1 = hn::Add(s1, hn::LoadU(d, p + i + L));
      s2 = hn::Add(s2, hn::LoadU(d, p + i + 2 * L));
      s3 = hn::Add(s3, hn::LoadU(d, p + i + 3 * L));
    }
  }
  uint64_t sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  for (int64_t i = streams * part; i < words; ++i) sum += p[i];
  return sum;
}

}  // namespace HWY_NAMESPACE
}  // namespace ork::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ork::cpu {

HWY_EXPORT(Rotate);
HWY_EXPORT(FloatMatmul);
HWY_EXPORT(RmsNorm);
HWY_EXPORT(Rope);
HWY_EXPORT(Swiglu);
HWY_EXPORT(Geglu);
HWY_EXPORT(Softmax);
HWY_EXPORT(ToF16);
HWY_EXPORT(AttentionHeadF16);
HWY_EXPORT(AttentionGroupF16);
HWY_EXPORT(StreamRead);

uint64_t stream_read(const uint64_t* p, int64_t words, int streams) {
  return HWY_DYNAMIC_DISPATCH(StreamRead)(p, words, streams == 4 || streams == 2 ? streams : 1);
}

void rotate(float* x, int64_t k, int block, const float* signs) { HWY_DYNAMIC_DISPATCH(Rotate)(x, k, block, signs); }

void float_matmul(FloatWeights kind, const void* w, int64_t k, const float* x, int n, float* y, int64_t ldy,
                  int64_t row_begin, int64_t row_end) {
  HWY_DYNAMIC_DISPATCH(FloatMatmul)(kind, w, k, x, n, y, ldy, row_begin, row_end);
}

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  HWY_DYNAMIC_DISPATCH(RmsNorm)(x, weight, n, eps, out);
}

void rope(float* head, int n_rot, bool adjacent, const float* cos, const float* sin) {
  HWY_DYNAMIC_DISPATCH(Rope)(head, n_rot, adjacent, cos, sin);
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(Swiglu)(gate, up, n, out);
}

void geglu(const float* gate, const float* up, int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(Geglu)(gate, up, n, out);
}

void softmax(float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(Softmax)(x, n); }

void to_f16(const float* x, int64_t n, uint16_t* out) { HWY_DYNAMIC_DISPATCH(ToF16)(x, n, out); }

void attention_head_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv, int head_dim,
                        int64_t stride, float scale, float* scores, float* out) {
  HWY_DYNAMIC_DISPATCH(AttentionHeadF16)(q, k, v, n_kv, head_dim, stride, scale, scores, out);
}

void attention_group_f16(const float* q, int group, const uint16_t* k, const uint16_t* v, int64_t n_kv, int head_dim,
                         int64_t stride, float scale, float* scores, float* out) {
  HWY_DYNAMIC_DISPATCH(AttentionGroupF16)(q, group, k, v, n_kv, head_dim, stride, scale, scores, out);
}

}  // namespace ork::cpu
#endif  // HWY_ONCE
