// Attention over a q8_0 KV cache. A pass over the keys scores a tile of
// sixteen positions for a few query heads at a time: each step of four
// dimensions is one load of the tile's codes (a position per int32 lane)
// and, per head, one broadcast of the query's four codes into a dot
// product; each block of 32 dimensions is converted to floats and scaled
// once per lane. Then a softmax per head, and a pass over the values that
// widens each position's row once for several heads.
#include "kernels/cpu/kv_attention.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/kv_layout.h"
#include "kernels/cpu/float_ops.h"
#include "kernels/cpu/targets.h"
#include "kernels/ref/kv_q8.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/kv_attention.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace ork::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_SCALAR

void AttentionGroupQ8(const float* q, int group, const int8_t* k_codes, const float* k_scales, const int8_t* v_codes,
                      const float* v_scales, const uint16_t* v16, int64_t n_kv, int head_dim, float scale, float* scores,
                      float* out) {
  ref::attention_group_q8(q, group, k_codes, k_scales, v_codes, v_scales, v16, n_kv, head_dim, scale, scores, out);
}

#else

#include "kernels/cpu/int8_dot-inl.h"  // DI8, DI32, PairsSigned, WidenAdd, DotAdd, DotAddBroadcast512

using DF = hn::ScalableTag<float>;       // the value pass: full vectors
using DT = hn::Repartition<float, DI8>;  // the key pass: a float per int32 lane
constexpr int kPosLanes = static_cast<int>(hn::MaxLanes(DI32()));  // positions per key vector
constexpr int kVecs = kKvTile / kPosLanes;                          // key vectors per tile

// The query heads quantized as cache rows: codes, scales and each block's
// code sum (what x86's unsigned dot product adds, taken off again).
struct QueryQ8 {
  std::vector<int8_t> codes;   // group x head_dim
  std::vector<float> scales;   // group x blocks
  std::vector<int32_t> sums;   // group x blocks
};

// Keys are signed; x86's vpdpbusd multiplies unsigned by signed bytes, so
// there the keys go in as k + 128 (their top bit flipped) and 128 times the
// query block's sum comes off. ARM's sdot takes them as they are; without a
// dot product, |q| and k with q's sign meet in pmaddubsw (never saturating:
// 2 x 127 x 127 < 2^15).
template <bool kDot>
constexpr bool kFlipped = kDot && ORK_X86_DOT;

template <bool kDot>
HWY_INLINE VI32 KeyDot(VI8 k, VI8 q, VI32 acc) {
#if ORK_X86_DOT
  if constexpr (kDot) return DotAddUnsigned(hn::BitCast(DU8(), hn::Xor(k, hn::Set(DI8(), int8_t{-128}))), q, acc);
#elif ORK_ARM_DOT
  if constexpr (kDot) return DotAdd(k, q, acc);
#endif
  return WidenAdd(PairsSigned(q, k), acc);
}

// Scores of heads g0..g0+H-1 for one tile (kt: its codes, st: its scales)
// into out (H rows, ld apart): every lane is a position, so each block's
// sum is converted and scaled in place.
template <bool kDot, int H>
HWY_INLINE void ScoreTile(const QueryQ8& qq, int g0, const int8_t* kt, const float* st, int hd, float scale, float* out,
                          int64_t ld) {
  const DI8 d8;
  const DI32 d32;
  const DT df;
  const int blocks = hd / kKvBlock;
  hn::Vec<DT> fa[H][kVecs];
  for (int h = 0; h < H; ++h) {
    for (int v = 0; v < kVecs; ++v) fa[h][v] = hn::Zero(df);
  }
  for (int b = 0; b < blocks; ++b) {
    VI32 ia[H][kVecs];
    for (int h = 0; h < H; ++h) {
      for (int v = 0; v < kVecs; ++v) ia[h][v] = hn::Zero(d32);
    }
    for (int j = 0; j < kKvBlock / 4; ++j) {
      const int8_t* kw = kt + (b * (kKvBlock / 4) + j) * (kKvTile * 4);
      VI8 kv[kVecs];
      for (int v = 0; v < kVecs; ++v) kv[v] = hn::LoadU(d8, kw + v * kPosLanes * 4);
      for (int h = 0; h < H; ++h) {
        int32_t word;
        std::memcpy(&word, &qq.codes[static_cast<size_t>((g0 + h) * hd + (b * (kKvBlock / 4) + j) * 4)], 4);
        const VI8 qb = hn::BitCast(d8, hn::Set(d32, word));
        for (int v = 0; v < kVecs; ++v) ia[h][v] = KeyDot<kDot>(kv[v], qb, ia[h][v]);
      }
    }
    for (int h = 0; h < H; ++h) {
      const size_t at = static_cast<size_t>((g0 + h) * blocks + b);
      const auto qs = hn::Set(df, qq.scales[at]);
      for (int v = 0; v < kVecs; ++v) {
        VI32 dot = ia[h][v];
        if constexpr (kFlipped<kDot>) dot = hn::Sub(dot, hn::Set(d32, 128 * qq.sums[at]));
        fa[h][v] = hn::MulAdd(hn::ConvertTo(df, dot), hn::Mul(hn::LoadU(df, st + b * kKvTile + v * kPosLanes), qs), fa[h][v]);
      }
    }
  }
  const auto vs = hn::Set(df, scale);
  for (int h = 0; h < H; ++h) {
    for (int v = 0; v < kVecs; ++v) hn::StoreU(hn::Mul(fa[h][v], vs), df, out + h * ld + v * kPosLanes);
  }
}

#if ORK_X86_DOT
// The same on AVX-512 VNNI, a whole tile per register: per step of four
// dimensions one load and flip of the codes, then one vpdpbusd per head
// with the query's four codes as its embedded broadcast. The same sums per
// lane, in the same order, as ScoreTile.
template <int H>
HWY_INLINE void ScoreTile512(const QueryQ8& qq, int g0, const int8_t* kt, const float* st, int hd, float scale,
                             float* out, int64_t ld) {
  static_assert(kKvTile == 16, "a tile is one 512-bit register of int32 lanes");
  const int blocks = hd / kKvBlock;
  const __m512i flip = _mm512_set1_epi8(-128);
  __m512 fa[H];
  for (int h = 0; h < H; ++h) fa[h] = _mm512_setzero_ps();
  for (int b = 0; b < blocks; ++b) {
    __m512i ia[H];
    for (int h = 0; h < H; ++h) ia[h] = _mm512_setzero_si512();
    for (int j = 0; j < kKvBlock / 4; ++j) {
      const int step = b * (kKvBlock / 4) + j;
      const __m512i kv = _mm512_xor_si512(_mm512_loadu_si512(kt + step * (kKvTile * 4)), flip);
      for (int h = 0; h < H; ++h) ia[h] = DotAddBroadcast512(ia[h], kv, &qq.codes[static_cast<size_t>((g0 + h) * hd + step * 4)]);
    }
    const __m512 ks = _mm512_loadu_ps(st + b * kKvTile);
    for (int h = 0; h < H; ++h) {
      const size_t at = static_cast<size_t>((g0 + h) * blocks + b);
      const __m512i dot = _mm512_sub_epi32(ia[h], _mm512_set1_epi32(128 * qq.sums[at]));
      fa[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(ks, _mm512_set1_ps(qq.scales[at])), fa[h]);
    }
  }
  for (int h = 0; h < H; ++h) _mm512_storeu_ps(out + h * ld, _mm512_mul_ps(fa[h], _mm512_set1_ps(scale)));
}
#endif

// Tiles (keys) and positions (values) the passes prefetch ahead.
constexpr int64_t kPrefetchTiles = 4;
constexpr int64_t kPrefetchRows = 64;

// Every head's scores over the tiles holding positions 0..n_kv-1, head g's
// at scores + g * ld (whole tiles: lanes past n_kv are written too).
template <bool kDot>
void Scores(const QueryQ8& qq, int group, const int8_t* k_codes, const float* k_scales, int64_t n_kv, int hd,
            float scale, float* scores, int64_t ld) {
  const int blocks = hd / kKvBlock;
  const int64_t tiles = (n_kv + kKvTile - 1) / kKvTile;
  for (int64_t t = 0; t < tiles; ++t) {
    const int8_t* kt = k_codes + t * kKvTile * hd;
    const float* st = k_scales + t * kKvTile * blocks;
    // The cache comes from DRAM at depth, and a tile's work is short: the
    // hardware prefetcher alone left the pass waiting on memory (a third
    // of the bandwidth in the model). Ask kPrefetchTiles ahead.
    if (t + kPrefetchTiles < tiles) {
      const int8_t* ahead = kt + kPrefetchTiles * kKvTile * hd;
      for (int line = 0; line < kKvTile * hd; line += 64) hwy::Prefetch(ahead + line);
      const float* ahead_scales = st + kPrefetchTiles * kKvTile * blocks;
      for (int line = 0; line < kKvTile * blocks; line += 16) hwy::Prefetch(ahead_scales + line);
    }
    float* out = scores + t * kKvTile;
    int g = 0;
#if ORK_X86_DOT
    if constexpr (kDot) {
      for (; g + 8 <= group; g += 8) ScoreTile512<8>(qq, g, kt, st, hd, scale, out + g * ld, ld);
      for (; g + 4 <= group; g += 4) ScoreTile512<4>(qq, g, kt, st, hd, scale, out + g * ld, ld);
      for (; g < group; ++g) ScoreTile512<1>(qq, g, kt, st, hd, scale, out + g * ld, ld);
      continue;
    }
#endif
    for (; g + 2 <= group; g += 2) ScoreTile<kDot, 2>(qq, g, kt, st, hd, scale, out + g * ld, ld);
    for (; g < group; ++g) ScoreTile<kDot, 1>(qq, g, kt, st, hd, scale, out + g * ld, ld);
  }
}

// Value s's floats at dimensions i..i+L-1: scale times codes, or f16.
template <bool kQ8>
HWY_INLINE hn::Vec<DF> ValueAt(const int8_t* v_codes, const float* v_scales, const uint16_t* v16, int64_t s, int i,
                               int hd) {
  const DF df;
  if constexpr (kQ8) {
    const hn::Rebind<int8_t, DF> d8;
    const hn::RebindToSigned<DF> di;
    const auto codes = hn::PromoteTo(di, hn::LoadU(d8, v_codes + KvQ8Layout::value_code(s, i, hd)));
    return hn::Mul(hn::ConvertTo(df, codes), hn::Set(df, v_scales[KvQ8Layout::value_scale(s, i / kKvBlock, hd)]));
  } else {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(v16 + s * hd + i)));
  }
}

// Positions per block of the value pass: 64 rows of 128 int8 values are
// 8 KiB, and stay in L1 while every head passes over them.
constexpr int64_t kVBlock = 64;

// out[g] = sum_s probs[g][s] value_s for heads g0..g0+H-1: H heads times S
// vectors of dimensions per pass, each value widened once for the H heads.
template <bool kQ8, int H, int S>
HWY_INLINE void ValuePass(const float* probs, int64_t ld, int g0, const int8_t* v_codes, const float* v_scales,
                          const uint16_t* v16, int64_t s0, int64_t s1, int i, int hd, float* out) {
  const DF df;
  const int L = static_cast<int>(hn::Lanes(df));
  hn::Vec<DF> o[S][H];
  for (int j = 0; j < S; ++j) {
    for (int h = 0; h < H; ++h) o[j][h] = s0 == 0 ? hn::Zero(df) : hn::LoadU(df, out + (g0 + h) * hd + i + j * L);
  }
  for (int64_t s = s0; s < s1; ++s) {
    hn::Vec<DF> p[H];
    for (int h = 0; h < H; ++h) p[h] = hn::Set(df, probs[(g0 + h) * ld + s]);
    for (int j = 0; j < S; ++j) {
      const auto v = ValueAt<kQ8>(v_codes, v_scales, v16, s, i + j * L, hd);
      for (int h = 0; h < H; ++h) o[j][h] = hn::MulAdd(p[h], v, o[j][h]);
    }
  }
  for (int j = 0; j < S; ++j) {
    for (int h = 0; h < H; ++h) hn::StoreU(o[j][h], df, out + (g0 + h) * hd + i + j * L);
  }
}

template <bool kQ8>
void Values(const float* probs, int64_t ld, int group, const int8_t* v_codes, const float* v_scales,
            const uint16_t* v16, int64_t n_kv, int hd, float* out) {
  const int L = static_cast<int>(hn::Lanes(DF()));
  for (int64_t s0 = 0; s0 < n_kv; s0 += kVBlock) {
    const int64_t s1 = std::min(n_kv, s0 + kVBlock);
    // The next block's rows, while this one's stay in L1 (see Scores).
    for (int64_t s = s1; s < std::min(n_kv, s1 + kPrefetchRows); ++s) {
      for (int i = 0; i < hd; i += kQ8 ? 64 : 32) {
        if constexpr (kQ8) {
          hwy::Prefetch(v_codes + KvQ8Layout::value_code(s, i, hd));
        } else {
          hwy::Prefetch(v16 + s * hd + i);
        }
      }
      if constexpr (kQ8) hwy::Prefetch(v_scales + KvQ8Layout::value_scale(s, 0, hd));
    }
    int g = 0;
    if (L == 16) {  // AVX-512: 32 registers hold eight heads times a block of 32 dimensions
      for (; g + 8 <= group; g += 8) {
        for (int i = 0; i < hd; i += 2 * L) ValuePass<kQ8, 8, 2>(probs, ld, g, v_codes, v_scales, v16, s0, s1, i, hd, out);
      }
    }
    for (; g + 4 <= group; g += 4) {
      int i = 0;
      for (; i + 2 * L <= hd; i += 2 * L) ValuePass<kQ8, 4, 2>(probs, ld, g, v_codes, v_scales, v16, s0, s1, i, hd, out);
      for (; i < hd; i += L) ValuePass<kQ8, 4, 1>(probs, ld, g, v_codes, v_scales, v16, s0, s1, i, hd, out);
    }
    for (; g < group; ++g) {
      int i = 0;
      for (; i + 4 * L <= hd; i += 4 * L) ValuePass<kQ8, 1, 4>(probs, ld, g, v_codes, v_scales, v16, s0, s1, i, hd, out);
      for (; i < hd; i += L) ValuePass<kQ8, 1, 1>(probs, ld, g, v_codes, v_scales, v16, s0, s1, i, hd, out);
    }
  }
}

void AttentionGroupQ8(const float* q, int group, const int8_t* k_codes, const float* k_scales, const int8_t* v_codes,
                      const float* v_scales, const uint16_t* v16, int64_t n_kv, int head_dim, float scale, float* scores,
                      float* out) {
  const int blocks = head_dim / kKvBlock;
  thread_local QueryQ8 qq;
  qq.codes.resize(static_cast<size_t>(group * head_dim));
  qq.scales.resize(static_cast<size_t>(group * blocks));
  qq.sums.resize(qq.scales.size());
  for (int g = 0; g < group; ++g) {
    int8_t* c = &qq.codes[static_cast<size_t>(g * head_dim)];
    ref::quantize_q8_row(q + g * head_dim, head_dim, c, &qq.scales[static_cast<size_t>(g * blocks)]);
    for (int b = 0; b < blocks; ++b) {
      int32_t sum = 0;
      for (int i = 0; i < kKvBlock; ++i) sum += c[b * kKvBlock + i];
      qq.sums[static_cast<size_t>(g * blocks + b)] = sum;
    }
  }
  const int64_t ld = (n_kv + kKvTile - 1) / kKvTile * kKvTile;
  if (int8_dot()) {
    Scores<true>(qq, group, k_codes, k_scales, n_kv, head_dim, scale, scores, ld);
  } else {
    Scores<false>(qq, group, k_codes, k_scales, n_kv, head_dim, scale, scores, ld);
  }
  for (int g = 0; g < group; ++g) ::ork::cpu::softmax(scores + g * ld, n_kv);
  if (v_codes != nullptr) {
    Values<true>(scores, ld, group, v_codes, v_scales, nullptr, n_kv, head_dim, out);
  } else {
    Values<false>(scores, ld, group, nullptr, nullptr, v16, n_kv, head_dim, out);
  }
}

#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace ork::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ork::cpu {

HWY_EXPORT(AttentionGroupQ8);

void attention_group_q8(const float* q, int group, const int8_t* k_codes, const float* k_scales,
                        const int8_t* v_codes, const float* v_scales, const uint16_t* v16, int64_t n_kv, int head_dim,
                        float scale, float* scores, float* out) {
  HWY_DYNAMIC_DISPATCH(AttentionGroupQ8)(q, group, k_codes, k_scales, v_codes, v_scales, v16, n_kv, head_dim, scale,
                                         scores, out);
}

// A row per token and KV head: the reference's own code is no cost worth a
// kernel of its own (the same codes either way).
void store_key_q8(const float* x, int head_dim, int64_t pos, int8_t* codes, float* scales) {
  ref::store_key_q8(x, head_dim, pos, codes, scales);
}

void store_value_q8(const float* x, int head_dim, int64_t pos, int8_t* codes, float* scales) {
  ref::store_value_q8(x, head_dim, pos, codes, scales);
}

}  // namespace ork::cpu
#endif  // HWY_ONCE
