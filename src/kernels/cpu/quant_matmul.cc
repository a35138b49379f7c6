// Quantized matmul on int8 activations, every orkpack tier.
//
// Every weight row is a sequence of 32-weight groups; a group inflates to
// one 32-byte vector of codes (two 16-byte halves on 128-bit targets):
// nibbles with a mask and a shift, the i5/i6 bit planes with a byte shuffle
// and a bit test (i5) or two lookups (i6), nf4 with a 16-entry byte shuffle
// (kernels/cpu/codes-inl.h). Codes meet the int8
// activations in a pairwise multiply-add into int16 (pmaddubsw on x86, a
// shift-split multiply elsewhere) and then int32 (pmaddwd). Rows accumulate
// in int32 over all of K and are scaled once: per-channel weight scales and
// per-token activation scales leave no per-block float work.
//
// Unsigned codes (i4, i5, i6: u = q + offset) go straight into pmaddubsw;
// the offset comes off once per row as offset * sum(a). Signed codes (nf4,
// i8, i8s) use |w| and a with w's sign. Neither can saturate int16:
// 2 * 63 * 127 and 2 * 128 * 127 are below 2^15.
//
// A register tile of R rows x T tokens shares each inflated group across T
// tokens and each activation load across R rows: R = 2, T = 1 for decode
// (two rows far apart: see MatmulKind), R = 4, T <= 2 for two or three
// tokens, R = 1, T = 8 for prefill (16 registers on AVX2). Activations are
// first laid out per tile in panels (PanelActs), so a tile reads them as
// one stream.
#include "kernels/cpu/quant_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/targets.h"
#include "kernels/ref/quant_matmul.h"
#include "quant/block_header.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quant_matmul.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace ork::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------------------
// Activation quantization.

void QuantizeActs(const float* x, int n, int64_t k, int8_t* q, float* scale, int32_t* sum) {
#if HWY_TARGET == HWY_SCALAR
  ref::quantize_acts(x, n, k, q, scale, sum);
#else
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const auto L = static_cast<int64_t>(hn::Lanes(df));
  for (int t = 0; t < n; ++t) {
    const float* xt = x + t * k;
    int8_t* qt = q + t * k;
    auto vmax = hn::Zero(df);
    int64_t i = 0;
    for (; i + L <= k; i += L) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, xt + i)));
    float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    for (; i < k; ++i) amax = std::max(amax, std::fabs(xt[i]));
    if (amax == 0.0f) {
      std::fill(qt, qt + k, int8_t{0});
      scale[t] = 0.0f;
      sum[t] = 0;
      continue;
    }
    const float inv = 127.0f / amax;
    const auto vinv = hn::Set(df, inv);
    auto vsum = hn::Zero(di);
    i = 0;
    for (; i + L <= k; i += L) {
      const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(df, xt + i), vinv));
      vsum = hn::Add(vsum, qi);
      hn::StoreU(hn::DemoteTo(d8, qi), d8, qt + i);
    }
    auto s = static_cast<int32_t>(hn::GetLane(hn::SumOfLanes(di, vsum)));
    for (; i < k; ++i) {
      qt[i] = static_cast<int8_t>(std::nearbyint(xt[i] * inv));
      s += qt[i];
    }
    scale[t] = amax / 127.0f;
    sum[t] = s;
  }
#endif
}

// ---------------------------------------------------------------------------
// Quantized matmul.

#if HWY_TARGET == HWY_SCALAR

void QuantMatmul(const QuantWeights& w, const QuantActs& a, float* y, int64_t ldy, int64_t row_begin,
                 int64_t row_end) {
  ref::quant_matmul(w, a, y, ldy, row_begin, row_end);
}

void DequantizeRow(const QuantWeights& w, int64_t r, float* out) { ref::dequantize_codes_row(w, r, out); }

#else

#include "kernels/cpu/int8_dot-inl.h"  // DU8 .. VI32, PairsSigned, WidenAdd, DotAdd, ORK_DOT
#include "kernels/cpu/codes-inl.h"  // kStepGroups, the bit-plane tables, Codes, MacInto, TileCodes

// Prefill reads its activations from a panel: the T tokens of a tile
// interleaved step by step (token 0's step 0, token 1's step 0, ..., token
// 0's step 1, ...), each step already in code order. One tile's loads then
// walk one contiguous stream instead of T streams a.k bytes apart (in a
// throwaway harness the 1x8 i4 tile went from 48 to 73 GMAC/s). A group left
// over on 256-bit targets follows, T x 32 bytes in weight order. (PanelActs
// copies the first `valid` of the n tokens and leaves zeros for the rest.)
constexpr int64_t kStepBytes = 32 * kStepGroups;

// Scratch for panels: 64-byte aligned, so no 32-byte load of a panel
// splits across two cache lines. Panel loads are what the prefill tile
// waits on: with a buffer 16 bytes off a line it ran at 0.82-0.89 of a plain
// intrinsics loop timed beside it in one process, aligned at 0.93-0.99.
HWY_INLINE int8_t* PanelScratch(std::vector<int8_t>& buf, int64_t bytes) {
  buf.resize(static_cast<size_t>(bytes) + 64);
  const auto at = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - at % 64) % 64);
}

// A 256-bit step's 64 bytes with its middle two 16-byte quarters swapped:
// weight order [g: 0..31 | g+1: 0..31] <-> code order [g: 0..15 | g+1:
// 0..15 | g: 16..31 | g+1: 16..31] (its own inverse).
HWY_INLINE void SwapMiddleQuarters(const int8_t* from, int8_t* to) {
  std::memcpy(to, from, 16);
  std::memcpy(to + 16, from + 32, 16);
  std::memcpy(to + 32, from + 16, 16);
  std::memcpy(to + 48, from + 48, 16);
}

template <bool kNibbleOrder>
void PanelActs(const int8_t* src, int n, int64_t k, int8_t* dst, int valid = -1) {
  const int64_t groups = k / 32, steps = groups / kStepGroups;
  if (valid < 0) valid = n;
  if (valid < n) std::memset(dst, 0, static_cast<size_t>(n * k));  // padding tokens: zeros
  for (int t = 0; t < valid; ++t) {
    const int8_t* s = src + t * k;
    for (int64_t st = 0; st < steps; ++st) {
      int8_t* d = dst + (st * n + t) * kStepBytes;
      const int8_t* from = s + st * kStepBytes;
      if (kL == 32 && kNibbleOrder) {
        SwapMiddleQuarters(from, d);
      } else {
        std::memcpy(d, from, kStepBytes);
      }
    }
    if (steps * kStepGroups < groups) std::memcpy(dst + steps * n * kStepBytes + t * 32, s + steps * kStepBytes, 32);
  }
}

// Rows are short (K/2 bytes for i4) and a tile reads R of them side by
// side, so the hardware prefetcher, which follows streams, ramps up late on
// each new tile. The R rows of the next tile are contiguous: each step
// prefetches as many of its bytes as it consumes of its own, so the next
// tile's rows arrive while this one computes.
template <int64_t kBytes>
HWY_INLINE void PrefetchSpan(const uint8_t* p) {
  for (int64_t off = 0; off < kBytes; off += 64) hwy::Prefetch(p + off);
}

// How far ahead a tile of at most four tokens prefetches its successors'
// rows: tiles that many bytes on, not the next one. Such a tile computes
// so little per byte (a 1 KB i4 row of K = 2048 in about 90 ns) that one
// tile ahead is less than a memory latency, and the reads and the
// arithmetic ran in series. llama-1b's four-token batch (`ork bench -p 4`,
// two threads, four alternating rounds in one sitting): 93.6 tok/s median
// one tile ahead, 99.2 at 2 KB, 103.6 at 4 KB (faster in every round).
// Tiles of eight tokens compute enough per byte to hide it already.
constexpr int64_t kSmallTilePrefetchBytes = 4096;

// Plane bytes of one row per step, fixed by the kind (quant_types.h).
template <CodeKind K>
constexpr int64_t kPlane0StepBytes = (K == CodeKind::kI8 ? 32 : 16) * kStepGroups;
template <CodeKind K>
constexpr int64_t kPlane1StepBytes =
    (K == CodeKind::kI5 ? 4 : K == CodeKind::kI6 ? 8 : K == CodeKind::kI8s ? 16 : 0) * kStepGroups;

// The kinds of four bits a weight (one plane of nibbles).
template <CodeKind K>
constexpr bool kFourBit = kPlane0StepBytes<K> == 16 * kStepGroups && kPlane1StepBytes<K> == 0;

// A tile's R rows r0 + r * stride: where each starts in both planes.
template <CodeKind K, int R>
struct CodeRows {
  int64_t b0, b1;  // plane bytes of a row
  const uint8_t* row0[R];
  const uint8_t* row1[R];  // null without a second plane
  HWY_INLINE CodeRows(const QuantWeights& w, int64_t r0, int64_t stride)
      : b0(plane0_row_bytes(K, w.k)), b1(plane1_row_bytes(K, w.k)) {
    for (int r = 0; r < R; ++r) {
      row0[r] = w.p0 + (r0 + r * stride) * b0;
      row1[r] = b1 > 0 ? w.p1 + (r0 + r * stride) * b1 : nullptr;
    }
  }
};

// The integer sums of rows r0..r0+R-1 with tokens 0..T-1 of the tile's
// panel (PanelActs), one vector per row and token, into acc. kFar: rows
// r0 + r * stride instead, R streams that each go on with their next row
// (decode; see MatmulKind).
template <CodeKind K, int R, int T, bool kDot, bool kFar>
HWY_INLINE void TileSums(const QuantWeights& w, const int8_t* panel, int64_t r0, int64_t stride, VI32 (&acc)[R][T]) {
  if constexpr (!kFar) stride = 1;
  using C = TileCodes<K, kDot>;
  const DI8 di;
  const DI32 d32;
  const CodeRows<K, R> rows(w, r0, stride);
  const int64_t b0 = rows.b0, b1 = rows.b1;
  const auto& row0 = rows.row0;
  const auto& row1 = rows.row1;
  // Plane bytes per step of one row, and where the rows `ahead` tiles on start.
  constexpr int64_t step0 = kPlane0StepBytes<K>, step1 = kPlane1StepBytes<K>;
  const int64_t ahead = T <= 4 ? std::max<int64_t>(1, kSmallTilePrefetchBytes / (R * (b0 + b1))) : 1;
  const uint8_t* next0 = w.p0 + (r0 + R * ahead) * b0;
  const uint8_t* next1 = b1 > 0 ? w.p1 + (r0 + R * ahead) * b1 : nullptr;
  // kFar: each of the R streams a share of both windows ahead; plane 1 as
  // many rows ahead as plane 0 (at least one) far, as many weights ahead
  // near (whole lines).
  constexpr int64_t far0 = kDecodeWindowBytes / R, near0 = kDecodeNearBytes / R;
  const int64_t far1 = b1 * std::max<int64_t>(1, far0 / b0);
  const int64_t near1 = b1 > 0 ? near0 * b1 / b0 / 64 * 64 : 0;

  // With the dot product, a step's second code vector sums into acc1: one
  // instruction per vector leaves its latency the bound unless two chains
  // per token run side by side (integer sums, so the order changes nothing).
  VI32 acc1[R][T];
  // i4 with x86's vpdpbusd, one token: a byte's high nibble stays in place
  // (b & 0xF0, sixteen times the code) instead of shifted down and masked,
  // and acc1's sum, a multiple of 16, comes down once at the end: one
  // instruction a vector fewer. vpdpbusd multiplies full unsigned bytes and
  // sums into int32 without saturating (|lane| <= 4 * 240 * 128 a step, so
  // rows below a million weights), so the integers are the same. Not for
  // the int16 pairs (240 * 127 * 2 saturates) nor ARM's sdot (signed
  // bytes). Its effect is where one core reads from memory: session 53, a
  // Zen 4, one thread, the kernel bench's decode stacks against a plain
  // read of the same loops, five alternated runs of eight rounds each:
  // dense 0.780 -> 0.838 of the plain read (median), experts 0.767 ->
  // 0.796; in L2 no change. Whole tokens in docs/BENCHMARKS.md 10.18.
  constexpr bool kHighInPlace = kDot && K == CodeKind::kI4 && T == 1 && ORK_X86_DOT;
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = acc1[r][t] = hn::Zero(d32);
  }
  const int64_t groups = w.k / 32;
  // Unsigned codes sum their int16 pairs over a block of steps before
  // widening (|pair sum| <= 2 * max_code * 127 per vector, so 8 of them for
  // i4, 4 for i5, 2 for i6 stay below 2^15); signed codes widen every vector,
  // and the dot product goes to int32 at once.
  constexpr bool kPairBlocks = C::kUnsigned && !kDot;
  constexpr int kBlock = !kPairBlocks ? 1 : K == CodeKind::kI4 ? 4 : K == CodeKind::kI5 ? 2 : 1;
  const int64_t steps = groups / kStepGroups;
  int64_t step = 0;
  int64_t g = 0;
  // One step: prefetch the next tile's share and inflate R rows' codes;
  // then, token by token, hand both code vectors of each row with that
  // token's two halves of activations to `mac(r, t, half, codes, acts)`.
  // Token by token, not half by half: GCC reassociates a token's two pair
  // sums into one add before the running sum, and half by half that kept
  // T first-half products live across the loop - with T = 8 two of the
  // int16 sums went to the stack, each step a store and a reload in their
  // chains (Zen 3, one core, BM_QuantMatmul i4 M = 64, K = 2048, best of
  // three interleaved rounds: 743 -> 587 us).
  auto run_step = [&](int64_t at_step, auto&& mac, auto phase) HWY_ATTR {
    if constexpr (kFar) {
      for (int r = 0; r < R; ++r) {
        DecodeStreamPrefetch<step0, decltype(phase)::value>(row0[r], at_step, near0, far0);
        if constexpr (step1 > 0) DecodeStreamPrefetch<step1>(row1[r], at_step, near1, far1);
      }
    } else {
      PrefetchSpan<R * step0>(next0 + at_step * R * step0);
      if constexpr (step1 > 0) PrefetchSpan<R * step1>(next1 + at_step * R * step1);
    }
    const int8_t* p = panel + at_step * T * kStepBytes;
    if constexpr (R > 1 && T > 1 && K != CodeKind::kI8) {
      // Several rows and tokens (the 4 x 2 tile of a batch of two or three
      // tokens): row by row, so that one row's codes are live at a time
      // beside the R x T sums instead of every row's - on AVX2 they had
      // spilled in every step. Zen 3, one core, BM_QuantMatmul M = 2, five
      // interleaved rounds, best of each: i5 1.12-1.22x, nf4 1.08-1.11x,
      // i8s 1.09x, i4 and i6 1.02-1.06x; i8 (32-byte code loads, few spills
      // before) 0.95x and stays as it was.
      for (int r = 0; r < R; ++r) {
        typename C::V c0, c1;
        C::LoadStep(row0[r], row1[r], g, c0, c1);
        for (int t = 0; t < T; ++t) {
          mac(r, t, 0, c0, hn::LoadU(di, p + t * kStepBytes));
          mac(r, t, 1, c1, hn::LoadU(di, p + t * kStepBytes + kL));
        }
      }
      g += kStepGroups;
      return;
    }
    typename C::V c0[R], c1[R];
    if constexpr (kHighInPlace) {
      const DU8 du;
      for (int r = 0; r < R; ++r) {
        const auto b = hn::LoadU(du, row0[r] + g * 16);
        c0[r] = hn::And(b, hn::Set(du, 0x0F));
        c1[r] = hn::And(b, hn::Set(du, 0xF0));  // 16 x the high code
      }
    } else {
      for (int r = 0; r < R; ++r) C::LoadStep(row0[r], row1[r], g, c0[r], c1[r]);
    }
    if constexpr (T == 1) {
      // Decode: every row's first half, then every row's second. Token by
      // token (the same order for one token, rows interleaved by half) made
      // the i4 decode tile 6-11 % slower in L2 at K = 512 (four
      // interleaved rounds).
      const VI8 av0 = hn::LoadU(di, p), av1 = hn::LoadU(di, p + kL);
      for (int r = 0; r < R; ++r) mac(r, 0, 0, c0[r], av0);
      for (int r = 0; r < R; ++r) mac(r, 0, 1, c1[r], av1);
    } else {
      for (int t = 0; t < T; ++t) {
        const VI8 av0 = hn::LoadU(di, p + t * kStepBytes);
        const VI8 av1 = hn::LoadU(di, p + t * kStepBytes + kL);
        for (int r = 0; r < R; ++r) {
          mac(r, t, 0, c0[r], av0);
          mac(r, t, 1, c1[r], av1);
        }
      }
    }
    g += kStepGroups;
  };
  for (; step < steps; step += kBlock) {
    const int block = static_cast<int>(std::min<int64_t>(kBlock, steps - step));
    if constexpr (kPairBlocks) {
      VI16 sum[R][T];
      for (int r = 0; r < R; ++r) {
        for (int t = 0; t < T; ++t) sum[r][t] = hn::Zero(DI16());
      }
      for (int j = 0; j < block; ++j) {
        run_step(step + j,
                 [&](int r, int t, int, auto c, VI8 av) HWY_ATTR { sum[r][t] = hn::Add(sum[r][t], C::Pairs(c, av)); },
                 std::integral_constant<int, -1>());
      }
      for (int r = 0; r < R; ++r) {
        for (int t = 0; t < T; ++t) acc[r][t] = WidenAdd(sum[r][t], acc[r][t]);
      }
    } else {
      auto mac = [&](int r, int t, int half, auto c, VI8 av) HWY_ATTR {
        if (kDot && half == 1) {
          acc1[r][t] = MacInto<C, kDot>(c, av, acc1[r][t]);
        } else {
          acc[r][t] = MacInto<C, kDot>(c, av, acc[r][t]);
        }
      };
      if constexpr (kFar && step0 < 64) {
        // Decode: a cache line's steps at once, each with its place in the
        // line known to the compiler, so the line's prefetches go without a
        // branch a step (DecodeStreamPrefetch). Steps come a line at a
        // time from the row's start, so `step` is each line's first.
        // Session 53, a Zen 4, one thread, the kernel bench's decode
        // stacks over a plain read of the same loops (BM_DecodeOverPlain,
        // BM_ExpertsOverPlain), four alternated runs, i4: experts 0.81-0.83
        // -> 0.88-0.91 of the plain read, dense 0.83-0.86 -> 0.94-0.95;
        // whole tokens in docs/BENCHMARKS.md 10.18.
        static_assert(kBlock == 1, "the loop's steps one by one here: a line's take its place");
        constexpr int kPerLine = static_cast<int>(64 / step0);
        if (step + kPerLine <= steps) {
          [&]<int... kPhase>(std::integer_sequence<int, kPhase...>) HWY_ATTR {
            (run_step(step + kPhase, mac, std::integral_constant<int, kPhase>()), ...);
          }(std::make_integer_sequence<int, kPerLine>());
          step += kPerLine - 1;
          continue;
        }
      }
      for (int j = 0; j < block; ++j) run_step(step + j, mac, std::integral_constant<int, -1>());
    }
  }
  if constexpr (kDot) {
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) {
        acc[r][t] = hn::Add(acc[r][t], kHighInPlace ? hn::ShiftRight<4>(acc1[r][t]) : acc1[r][t]);  // exact
      }
    }
  }
  if constexpr (kStepGroups == 2) {
    if (g < groups) {  // the odd group
      typename C::V c[R];
      for (int r = 0; r < R; ++r) c[r] = C::LoadGroup(row0[r], row1[r], g);
      for (int t = 0; t < T; ++t) {
        const auto av = hn::LoadU(di, panel + steps * T * kStepBytes + t * 32);
        for (int r = 0; r < R; ++r) acc[r][t] = MacInto<C, kDot>(c[r], av, acc[r][t]);
      }
    }
  }
}

// Each of acc's vectors summed to one int32: dots[r][t].
template <int R, int T>
HWY_INLINE void TileDots(const VI32 (&acc)[R][T], int32_t (&dots)[R][T]) {
  const DI32 d32;
  for (int t = 0; t < T; ++t) {
#if ORK_X86_256
    if constexpr (R == 4) {
      // The four rows' sums at once: three horizontal adds and one add of
      // the halves instead of four separate reductions (short rows, such as
      // K = 768, spend a tenth of their time here otherwise).
      const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0][t].raw, acc[1][t].raw),
                                          _mm256_hadd_epi32(acc[2][t].raw, acc[3][t].raw));
      alignas(16) int32_t four[4];
      _mm_store_si128(reinterpret_cast<__m128i*>(four),
                      _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
      for (int r = 0; r < R; ++r) dots[r][t] = four[r];
      continue;
    }
#endif
    for (int r = 0; r < R; ++r) dots[r][t] = static_cast<int32_t>(hn::GetLane(hn::SumOfLanes(d32, acc[r][t])));
  }
}

// y of row `row` for tokens t0..t0+T-1 from its integer sums.
template <CodeKind K, int T, bool kDot>
HWY_INLINE void TileStore(const QuantWeights& w, const QuantActs& a, const int32_t (&dots)[T], int64_t row, int t0,
                          float* y, int64_t ldy) {
  using C = TileCodes<K, kDot>;
  const float ws = w.scales[row] * w.scale_mul;
  for (int t = 0; t < T; ++t) {
    int32_t dot = dots[t];
    if constexpr (C::kUnsigned) dot -= C::kOffset * a.sum[t0 + t];
    y[(t0 + t) * ldy + row] = ws * a.scale[t0 + t] * static_cast<float>(dot);
  }
}

#if ORK_X86_256
// TileDots and TileStore for one row and eight tokens on 256-bit x86: the
// eight sums reduced together (six horizontal adds, two lane swaps and an
// add) and the eight results made in one vector - the same integers, and
// the same float products in the same order as TileStore's. The i4 tile is
// 117 instructions shorter (470 -> 353); its end had been an eighth of its
// time at K = 2048 (perf), more at K = 512. Zen 3, one core,
// BM_QuantMatmul i4, best of eight interleaved rounds: M = 64, K = 512
// 200 -> 182 us; M = 16 51 -> 45; K = 2048 within 3 %; nf4 unchanged.
template <CodeKind K, bool kDot>
HWY_INLINE void TileEnd8(const QuantWeights& w, const QuantActs& a, const VI32 (&acc)[8], int64_t row, int t0, float* y,
                         int64_t ldy) {
  using C = TileCodes<K, kDot>;
  const auto quad = [](const VI32* v) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(v[0].raw, v[1].raw), _mm256_hadd_epi32(v[2].raw, v[3].raw));
  };
  // lo: tokens 0..3's sums of their low 128 bits, then of their high; hi: 4..7's.
  const __m256i lo = quad(acc), hi = quad(acc + 4);
  __m256i dots = _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
  if constexpr (C::kUnsigned) {
    const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sum + t0));
    dots = _mm256_sub_epi32(dots, _mm256_mullo_epi32(_mm256_set1_epi32(C::kOffset), sums));
  }
  const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(w.scales[row] * w.scale_mul), _mm256_loadu_ps(a.scale + t0));
  alignas(32) float out[8];
  _mm256_store_ps(out, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(dots)));
  for (int t = 0; t < 8; ++t) y[(t0 + t) * ldy + row] = out[t];
}
#endif

// y for rows r0..r0+R-1 and tokens t0..t0+T-1, whose activations are the
// tile's panel (PanelActs). kFar: rows r0 + r * stride instead (TileSums).
template <CodeKind K, int R, int T, bool kDot, bool kFar = false>
HWY_NOINLINE void Tile(const QuantWeights& w, const QuantActs& a, const int8_t* panel, int64_t r0, int t0, float* y,
                       int64_t ldy, int64_t stride = 1) {
  if constexpr (!kFar) stride = 1;
  VI32 acc[R][T];
  TileSums<K, R, T, kDot, kFar>(w, panel, r0, stride, acc);
#if ORK_X86_256
  if constexpr (R == 1 && T == 8) return TileEnd8<K, kDot>(w, a, acc[0], r0, t0, y, ldy);
#endif
  int32_t dots[R][T];
  TileDots<R, T>(acc, dots);
  for (int r = 0; r < R; ++r) TileStore<K, T, kDot>(w, a, dots[r], r0 + r * stride, t0, y, ldy);
}

// Decode of rows [r0, r0 + half) and [r0 + half, r0 + 2 half): Tile<K, 2, 1,
// kDot, true> row by row - the same two streams, read in the same order -
// with two rows' pairs summed before the four are reduced at once, and no
// call between rows. A row of K = 512 (a MoE's expert down) is eight steps,
// and a call, its setup and a reduction a row had been about 40 % of its
// time: BM_QuantMatmulInL2 (one core, the matrix in L2, Zen 5, best of five
// a round, five interleaved rounds) i4 31.5 -> 54.9 GB/s at K = 512, 53 ->
// 61 at K = 2048, i5 29 -> 35 at K = 512. Reading the same rows as four
// streams at once (two adjacent rows a stream, R = 4) was as fast in L2 and
// 15-20 % slower from DRAM.
template <CodeKind K, bool kDot>
HWY_NOINLINE void DecodeFar(const QuantWeights& w, const QuantActs& a, const int8_t* panel, int64_t r0, int64_t half,
                            float* y, int64_t ldy) {
  int64_t r = r0;
  for (; r + 2 <= r0 + half; r += 2) {
    VI32 first[2][1], second[2][1];
    TileSums<K, 2, 1, kDot, true>(w, panel, r, half, first);
    TileSums<K, 2, 1, kDot, true>(w, panel, r + 1, half, second);
    const VI32 acc[4][1] = {{first[0][0]}, {first[1][0]}, {second[0][0]}, {second[1][0]}};
    int32_t dots[4][1];
    TileDots<4, 1>(acc, dots);
    const int64_t rows[4] = {r, r + half, r + 1, r + 1 + half};
    for (int i = 0; i < 4; ++i) TileStore<K, 1, kDot>(w, a, dots[i], rows[i], 0, y, ldy);
  }
  if (r < r0 + half) Tile<K, 2, 1, kDot, true>(w, a, panel, r, 0, y, ldy, half);
}

// Decode of the one-plane nibble kinds (i4, nf4; kFourBit): four streams,
// rows [r0 + i quarter, r0 + (i + 1) quarter) for i < 4, read in lockstep
// one row of each at a time, the four sums reduced at once. Session 41, a
// Zen 5 (AVX3_VNNI), llama-1b packed uniform at each kind, `ork bench -p 0
// -n 32 -r 3`, two streams against four in alternating runs of one sitting:
// two threads i4 70.3 -> 77.4 % of the probe, nf4 66-69 -> 78 %; one thread
// i4 80 -> 88 %, nf4 78 -> 96 %. The kinds with a second plane (i5, i6, i8s:
// each stream two) and i8 (twice the bytes a step) lost 3-10 % with four
// and stay with DecodeFar. Four streams at 4 KB ahead each gained nothing
// (BM_DecodeLoops); the window split in four (2 KB each) did.
template <CodeKind K, bool kDot>
HWY_NOINLINE void DecodeFar4(const QuantWeights& w, const QuantActs& a, const int8_t* panel, int64_t r0,
                             int64_t quarter, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r0 + quarter; ++r) {
    VI32 acc[4][1];
    TileSums<K, 4, 1, kDot, true>(w, panel, r, quarter, acc);
    int32_t dots[4][1];
    TileDots<4, 1>(acc, dots);
    for (int i = 0; i < 4; ++i) TileStore<K, 1, kDot>(w, a, dots[i], r + i * quarter, 0, y, ldy);
  }
}

#include "kernels/cpu/wide_tile-inl.h"  // TileWide: the batch tile on AVX-512 VNNI

// The R x T batch tile (R adjacent rows): TileWide where the CPU has
// AVX-512 VNNI, else Tile row by row. Tokens from nt on are padding (the
// panel holds zeros there): not written (TileWide only: kPadTiles).
template <CodeKind K, int T, int R, bool kDot>
HWY_INLINE void BatchTile(const QuantWeights& w, const QuantActs& a, const int8_t* panel, int64_t r0, int t0, float* y,
                          int64_t ldy, [[maybe_unused]] int nt) {
#if ORK_X86_DOT
  if constexpr (kDot && T >= 4) return TileWide<K, T, R>(w, a, panel, r0, t0, y, ldy, nt);
#endif
  for (int r = 0; r < R; ++r) Tile<K, 1, T, kDot>(w, a, panel, r0 + r, t0, y, ldy);
}

// Whether a chunk's last tokens go in one tile of 8 or 4 with zeros after
// them: where the batch tile is TileWide, which writes only the tokens
// given. A single-token tile runs at a quarter of the four-token tile's
// multiply-adds a second, so the padded tile costs less from two tokens on
// (at 16 tokens an expert - a MoE's prefill - a fifth of the tiles were
// single tokens).
template <bool kDot>
constexpr bool kPadTiles = kDot && ORK_X86_DOT;

// Prefill, blocked for the caches: tokens in chunks whose activations stay
// in L2 (<= 256 KiB), copied into one panel per tile of 8 tokens (then the
// rest: see kPadTiles) (PanelActs); rows in blocks whose weights stay in L2
// (<= 128 KiB), and within a block, each tile (in L1) against every row of
// the block. Weights are read from memory once per token chunk.
template <CodeKind K, bool kDot>
void MatmulPrefill(const QuantWeights& w, const QuantActs& a, float* y, int64_t ldy, int64_t row_begin,
                   int64_t row_end) {
  const int chunk = static_cast<int>(std::clamp<int64_t>((int64_t{256} << 10) / a.k / 8 * 8, 8, 256));
  const int64_t row_bytes = plane0_row_bytes(K, w.k) + plane1_row_bytes(K, w.k);
  const int64_t row_block = std::max<int64_t>(4, (int64_t{128} << 10) / row_bytes);
  thread_local std::vector<int8_t> scratch;
  // A chunk is a multiple of 8 tokens, so a padded last tile fits in it.
  int8_t* const panels = PanelScratch(scratch, chunk * a.k);
  struct TokenTile {
    int t, size, valid;
  };
  thread_local std::vector<TokenTile> tiles;
  for (int c0 = 0; c0 < a.n; c0 += chunk) {
    const int c1 = std::min(a.n, c0 + chunk);
    // Tiles of 8 tokens, then the rest: one tile of 8 or 4 with padding
    // (kPadTiles), else one of 4 and single tokens.
    tiles.clear();
    int t = c0;
    for (; t + 8 <= c1; t += 8) tiles.push_back({t, 8, 8});
    const int rest = c1 - t;
    if (kPadTiles<kDot> && rest >= 5) {
      tiles.push_back({t, 8, rest});
    } else if (kPadTiles<kDot> && rest >= 2) {
      tiles.push_back({t, 4, rest});
    } else {
      if (rest >= 4) tiles.push_back({t, 4, 4}), t += 4;
      for (; t < c1; ++t) tiles.push_back({t, 1, 1});
    }
    for (const TokenTile& tt : tiles) {
      PanelActs<Codes<K>::kNibbleOrder>(a.q + tt.t * a.k, tt.size, a.k, panels + (tt.t - c0) * a.k, tt.valid);
    }
    for (int64_t rb = row_begin; rb < row_end; rb += row_block) {
      const int64_t re = std::min(row_end, rb + row_block);
      for (const TokenTile& tt : tiles) {
        const int8_t* panel = panels + (tt.t - c0) * a.k;
        switch (tt.size) {
          case 8: {
            int64_t r = rb;
            for (; r + 2 <= re; r += 2) BatchTile<K, 8, 2, kDot>(w, a, panel, r, tt.t, y, ldy, tt.valid);
            if (r < re) BatchTile<K, 8, 1, kDot>(w, a, panel, r, tt.t, y, ldy, tt.valid);
            break;
          }
          case 4: {
            // Two rows a tile (four for the 4-bit kinds): each activation
            // load meets them all.
            int64_t r = rb;
            if constexpr (kFourBit<K>) {
              for (; r + 4 <= re; r += 4) BatchTile<K, 4, 4, kDot>(w, a, panel, r, tt.t, y, ldy, tt.valid);
            }
            for (; r + 2 <= re; r += 2) BatchTile<K, 4, 2, kDot>(w, a, panel, r, tt.t, y, ldy, tt.valid);
            if (r < re) BatchTile<K, 4, 1, kDot>(w, a, panel, r, tt.t, y, ldy, tt.valid);
            break;
          }
          default:
            for (int64_t r = rb; r < re; ++r) Tile<K, 1, 1, kDot>(w, a, panel, r, tt.t, y, ldy);
        }
      }
    }
  }
}

// Decode: the thread's rows split in two halves, read in lockstep one row of
// each at a time (a tile of two rows a half apart, sharing each activation
// load): two long sequential weight streams per thread, each prefetched
// one row ahead. The compute between loads keeps few demand misses in
// flight, so reading waits on the hardware prefetcher, which runs a limited
// depth ahead of each stream it follows: two streams double it. Same loops
// over llama-1b's decode matrices, alternating in one process, as a fraction
// of the bandwidth probe (median of 12-16 rounds): four adjacent rows per
// tile (four streams of one row each, restarting every tile) 0.78; one row
// at a time 0.84-0.86; two far streams 0.94-1.0, the same as a plain read
// of the same bytes in the same loops. Three far streams gained no more;
// halving the arithmetic per byte changed nothing; farther prefetches or
// real loads ahead in place of prefetches were slower. (There a plain read
// gained nothing from more streams; a Zen 5 core reads about 1.2x more from
// two than from one - docs/BENCHMARKS.md's header - and four far streams
// were still slower than two for this kernel, session 37, each 4 KB
// ahead; split into 2 KB a stream, four won for i4 and nf4 in session 41:
// DecodeFar4.) Batches
// of two or three tokens keep four adjacent rows per tile, where two tokens
// share each inflated weight. The activations go into a panel first, so
// the steps load them in code order without shuffles.
template <CodeKind K, bool kDot>
void MatmulKind(const QuantWeights& w, const QuantActs& a, float* y, int64_t ldy, int64_t row_begin,
                int64_t row_end) {
  if (a.n >= 4) return MatmulPrefill<K, kDot>(w, a, y, ldy, row_begin, row_end);
  thread_local std::vector<int8_t> scratch;
  int8_t* const panel = PanelScratch(scratch, a.n * a.k);
  const int pairs = a.n / 2;
  if (pairs > 0) PanelActs<Codes<K>::kNibbleOrder>(a.q, 2, a.k, panel);
  if (a.n % 2 == 1) PanelActs<Codes<K>::kNibbleOrder>(a.q + 2 * pairs * a.k, 1, a.k, panel + 2 * pairs * a.k);
  const int8_t* single = panel + 2 * pairs * a.k;
  if (a.n == 1) {
    if constexpr (kFourBit<K>) {
      const int64_t quarter = (row_end - row_begin) / 4;
      DecodeFar4<K, kDot>(w, a, single, row_begin, quarter, y, ldy);
      for (int64_t r = row_begin + 4 * quarter; r < row_end; ++r) Tile<K, 1, 1, kDot>(w, a, single, r, 0, y, ldy);
      return;
    }
    const int64_t half = (row_end - row_begin) / 2;
    DecodeFar<K, kDot>(w, a, single, row_begin, half, y, ldy);
    if ((row_end - row_begin) % 2 == 1) Tile<K, 1, 1, kDot>(w, a, single, row_end - 1, 0, y, ldy);
    return;
  }
  int64_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) {
    if (pairs > 0) Tile<K, 4, 2, kDot>(w, a, panel, r, 0, y, ldy);
    if (a.n % 2 == 1) Tile<K, 4, 1, kDot>(w, a, single, r, 2 * pairs, y, ldy);
  }
  for (; r < row_end; ++r) {
    if (pairs > 0) Tile<K, 1, 2, kDot>(w, a, panel, r, 0, y, ldy);
    if (a.n % 2 == 1) Tile<K, 1, 1, kDot>(w, a, single, r, 2 * pairs, y, ldy);
  }
}

#include "kernels/cpu/block_matmul-inl.h"  // the block kinds: MatmulBlockKind

// The embedding lookup: each step's code vectors (as the matmul inflates
// them) back into weight order, widened to int32, less the offset, to
// float, times the row's scale - the reference's one rounding per weight.
template <CodeKind K>
void DequantizeRowKind(const QuantWeights& w, int64_t r, float* out) {
  using C = Codes<K>;
  const DI8 di;
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> d32;
  const hn::Rebind<int8_t, decltype(d32)> d8;
  const auto nf = static_cast<int64_t>(hn::Lanes(df));
  const uint8_t* row0 = w.p0 + r * plane0_row_bytes(K, w.k);
  const uint8_t* row1 = w.p1 != nullptr ? w.p1 + r * plane1_row_bytes(K, w.k) : nullptr;
  const auto scale = hn::Set(df, w.scales[r] * w.scale_mul);
  const auto offset = hn::Set(d32, C::kOffset);
  alignas(64) int8_t step[2 * kL], ordered[2 * kL];
  auto emit = [&](const int8_t* codes, int64_t count, float* dst) HWY_ATTR {
    for (int64_t i = 0; i < count; i += nf) {
      const auto code = hn::Sub(hn::PromoteTo(d32, hn::LoadU(d8, codes + i)), offset);
      hn::StoreU(hn::Mul(scale, hn::ConvertTo(df, code)), df, dst + i);
    }
  };
  const int64_t groups = w.k / 32, steps = groups / kStepGroups;
  for (int64_t st = 0; st < steps; ++st) {
    typename C::V c0, c1;
    C::LoadStep(row0, row1, st * kStepGroups, c0, c1);
    hn::Store(hn::BitCast(di, c0), di, step);
    hn::Store(hn::BitCast(di, c1), di, step + kL);
    const int8_t* codes = step;
    if constexpr (kL == 32 && C::kNibbleOrder) {  // [g lo | g+1 lo], [g hi | g+1 hi]
      SwapMiddleQuarters(step, ordered);
      codes = ordered;
    }
    emit(codes, 2 * static_cast<int64_t>(kL), out + st * 2 * static_cast<int64_t>(kL));
  }
  if constexpr (kStepGroups == 2) {
    if (steps * 2 < groups) {  // the odd group, in weight order
      hn::Store(hn::BitCast(di, C::LoadGroup(row0, row1, steps * 2)), di, step);
      emit(step, 32, out + steps * 64);
    }
  }
}

void DequantizeRow(const QuantWeights& w, int64_t r, float* out) {
  switch (w.kind) {
    case CodeKind::kQ4k:
    default: return ref::dequantize_codes_row(w, r, out);  // the block kinds: a lookup per token, not hot
    case CodeKind::kI4: return DequantizeRowKind<CodeKind::kI4>(w, r, out);
    case CodeKind::kNf4: return DequantizeRowKind<CodeKind::kNf4>(w, r, out);
    case CodeKind::kI5: return DequantizeRowKind<CodeKind::kI5>(w, r, out);
    case CodeKind::kI6: return DequantizeRowKind<CodeKind::kI6>(w, r, out);
    case CodeKind::kI8: return DequantizeRowKind<CodeKind::kI8>(w, r, out);
    case CodeKind::kI8s: return DequantizeRowKind<CodeKind::kI8s>(w, r, out);
  }
}

template <bool kDot>
void MatmulAnyKind(const QuantWeights& w, const QuantActs& a, float* y, int64_t ldy, int64_t row_begin,
                   int64_t row_end) {
  switch (w.kind) {
    case CodeKind::kI4: return MatmulKind<CodeKind::kI4, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kNf4: return MatmulKind<CodeKind::kNf4, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kI5: return MatmulKind<CodeKind::kI5, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kI6: return MatmulKind<CodeKind::kI6, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kI8:
      // Per-block activation scales where the floats are given (quant_types.h).
      if (a.f32 != nullptr) return MatmulBlockKind<CodeKind::kI8, kDot>(w, a, y, ldy, row_begin, row_end);
      return MatmulKind<CodeKind::kI8, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kI8s: return MatmulKind<CodeKind::kI8s, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kQ4k: return MatmulBlockKind<CodeKind::kQ4k, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kQ6k: return MatmulBlockKind<CodeKind::kQ6k, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kQ5k: return MatmulBlockKind<CodeKind::kQ5k, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kQ80: return MatmulBlockKind<CodeKind::kQ80, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kQ40: return MatmulBlockKind<CodeKind::kQ40, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kQ41: return MatmulBlockKind<CodeKind::kQ41, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kQ50: return MatmulBlockKind<CodeKind::kQ50, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kQ51: return MatmulBlockKind<CodeKind::kQ51, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kIq4nl: return MatmulBlockKind<CodeKind::kIq4nl, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kIq4xs: return MatmulBlockKind<CodeKind::kIq4xs, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kQ3k: return MatmulBlockKind<CodeKind::kQ3k, kDot>(w, a, y, ldy, row_begin, row_end);
    case CodeKind::kQ2k: return MatmulBlockKind<CodeKind::kQ2k, kDot>(w, a, y, ldy, row_begin, row_end);
  }
}

void QuantMatmul(const QuantWeights& w, const QuantActs& a, float* y, int64_t ldy, int64_t row_begin,
                 int64_t row_end) {
#if ORK_DOT
  if (int8_dot()) return MatmulAnyKind<true>(w, a, y, ldy, row_begin, row_end);
#endif
  MatmulAnyKind<false>(w, a, y, ldy, row_begin, row_end);
}

#undef ORK_X86_256
#undef ORK_X86_128
#undef ORK_ARM_DOT
#undef ORK_X86_DOT
#undef ORK_DOT

#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace ork::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ork::cpu {

HWY_EXPORT(QuantizeActs);
HWY_EXPORT(QuantMatmul);
HWY_EXPORT(DequantizeRow);

void quantize_acts(const float* x, int n, int64_t k, int8_t* q, float* scale, int32_t* sum) {
  HWY_DYNAMIC_DISPATCH(QuantizeActs)(x, n, k, q, scale, sum);
}

void quant_matmul(const QuantWeights& w, const QuantActs& a, float* y, int64_t ldy, int64_t row_begin,
                  int64_t row_end) {
  HWY_DYNAMIC_DISPATCH(QuantMatmul)(w, a, y, ldy, row_begin, row_end);
}

void dequantize_row(const QuantWeights& w, int64_t r, float* out) { HWY_DYNAMIC_DISPATCH(DequantizeRow)(w, r, out); }

}  // namespace ork::cpu
#endif  // HWY_ONCE
