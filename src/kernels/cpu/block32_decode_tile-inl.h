// Decode's tile for q4_0 and iq4_nl rows on AVX-512 VNNI (the AVX3_VNNI
// target), one SIMD target's worth. Not a header of its own:
// kernels/cpu/block_matmul-inl.h includes it inside its HWY_NAMESPACE once
// per target (Highway's -inl convention), after BlockRows and the f16
// helpers; it holds code only where ORK_X86_DOT is set (the AVX3 targets).
// The toggle guard lets each target's pass include it again.
#if defined(ORK_KERNELS_CPU_BLOCK32_DECODE_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ORK_KERNELS_CPU_BLOCK32_DECODE_TILE_INL_H_
#undef ORK_KERNELS_CPU_BLOCK32_DECODE_TILE_INL_H_
#else
#define ORK_KERNELS_CPU_BLOCK32_DECODE_TILE_INL_H_
#endif

#if ORK_X86_DOT
// Block32Tile decodes a q4_0 row (llama.cpp's Q4_0 files, as ork carries
// them) 64 weights a step in 256-bit vectors: two int16 pair products, an
// int16 add and a widening multiply-add, and per group an f16 scale turned
// to float as a scalar and placed in half a vector - about three times
// i4's instructions per byte, so in L2 it read 19-21 GB/s a core against
// i4's 33-52 (BM_QuantMatmulInL2, docs/BENCHMARKS.md 10.5). Here a step is
// four groups (128 weights, 64 bytes of nibbles) in 512-bit registers:
// the low and the high nibbles each meet their activations in one
// vpdpbusd, so each 128-bit block of the int32 sum holds one group; the
// four groups' f16 scales convert in one instruction and spread to their
// blocks in one permute, meet the activation scales (made once per token,
// already spread) and the sum in one multiply and one multiply-add. The
// same integers as Block32Tile; the float products in another order.
template <CodeKind K>
constexpr bool kBlock32Decode512 = K == CodeKind::kQ40 || K == CodeKind::kIq4nl;

// q4_0's codes are unsigned as stored (less 8); iq4_nl's table levels plus
// 128 (1 .. 241) make its codes unsigned too. Either way each group's sum
// starts from minus the offset times its activations.
template <CodeKind K>
constexpr int kDecode512Offset = K == CodeKind::kQ40 ? 8 : 128;
alignas(16) constexpr uint8_t kIq4nlTableU8[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
static_assert(kIq4nlTableU8[0] == kIq4nlTable[0] + 128 && kIq4nlTableU8[15] == kIq4nlTable[15] + 128,
              "the levels plus 128");

// One token's activations as the tile reads them, per step of four groups:
// 64 bytes of the groups' first sixteen activations (the low nibbles'),
// then 64 of their last sixteen; sixteen int32 offsets (minus the offset
// times the activations under each lane); sixteen floats, each group's
// activation scale in its four lanes. Groups past the row's end are zeros.
struct Decode512Acts {
  std::vector<uint8_t> bytes;  // storage, with room to align it
  const int8_t* panel = nullptr;
  const int32_t* offsets = nullptr;
  const float* scales = nullptr;
};

// q: the token's k codes; scales: one per group of 32.
template <int kOffset>
HWY_NOINLINE void Decode512Prepare(const int8_t* q, const float* scales, int64_t k, Decode512Acts& out) {
  const int64_t groups = k / 32, steps = (groups + 3) / 4;
  const size_t panel_bytes = static_cast<size_t>(steps * 128), side_bytes = static_cast<size_t>(steps * 64);
  out.bytes.resize(panel_bytes + 2 * side_bytes + 64);
  const auto at = reinterpret_cast<uintptr_t>(out.bytes.data());
  uint8_t* base = out.bytes.data() + ((64 - at % 64) % 64);
  auto* panel = reinterpret_cast<int8_t*>(base);
  auto* offsets = reinterpret_cast<int32_t*>(base + panel_bytes);
  auto* spread = reinterpret_cast<float*>(base + panel_bytes + side_bytes);
  std::memset(base, 0, panel_bytes + 2 * side_bytes);
  for (int64_t g = 0; g < groups; ++g) {
    int8_t* p = panel + (g / 4) * 128 + (g % 4) * 16;
    std::memcpy(p, q + g * 32, 16);
    std::memcpy(p + 64, q + g * 32 + 16, 16);
    std::fill_n(spread + g * 4, 4, scales[g]);
  }
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(kOffset));
  for (int64_t st = 0; st < steps; ++st) {
    __m512i sum = _mm512_setzero_si512();
    sum = DotAddUnsigned512(sum, offset, _mm512_load_si512(panel + st * 128));
    sum = DotAddUnsigned512(sum, offset, _mm512_load_si512(panel + st * 128 + 64));
    _mm512_store_si512(offsets + st * 16, _mm512_sub_epi32(_mm512_setzero_si512(), sum));
  }
  out.panel = panel;
  out.offsets = offsets;
  out.scales = spread;
}

// y for rows r0 + r * stride, r < R: R far streams, each going on with its
// next row on the next call (decode's two streams a thread, as Tile's and
// Block32Tile's kFar), each prefetching kFarPrefetchBytes ahead of its
// codes and a row ahead of its scales.
template <CodeKind K, int R>
HWY_NOINLINE void Block32Decode512(const QuantWeights& w, const Decode512Acts& a, int64_t r0, int64_t stride,
                                   float* y) {
  static_assert(kBlock32Decode512<K>, "a kind the tile serves");
  static_assert(Block32Codes<K>::kHeader == 2, "one f16 d per group, a row's headers adjacent");
  const BlockRows<K, R> rows(w, r0, stride);
  const int64_t b1 = rows.b1;
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4nlTableU8)));
  const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  __m512 facc[R];
  for (int r = 0; r < R; ++r) facc[r] = _mm512_setzero_ps();
  const int64_t groups = w.k / 32, full = groups / 4;
  // One step; `left` < 4: the row's last groups, read under a mask (the
  // panel, offsets and scales hold zeros past them, and so do the masked
  // codes and scales: no NaN from bytes past the row).
  auto step = [&](int64_t st, int left) HWY_ATTR {
    for (int r = 0; r < R; ++r) {
      hwy::Prefetch(rows.row0[r] + kFarPrefetchBytes + st * 64);
      if (st % 8 == 0) hwy::Prefetch(rows.headers[r] + b1 + st * 8);
    }
    const __m512i alo = _mm512_load_si512(a.panel + st * 128), ahi = _mm512_load_si512(a.panel + st * 128 + 64);
    const __m512i off = _mm512_load_si512(a.offsets + st * 16);
    const __m512 as = _mm512_load_ps(a.scales + st * 16);
    for (int r = 0; r < R; ++r) {
      const uint8_t* codes = rows.row0[r] + st * 64;
      const uint8_t* heads = rows.headers[r] + st * 8;
      __m512i b;
      __m128i h;
      if (left == 4) {
        b = _mm512_loadu_si512(codes);
        h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(heads));
      } else {
        b = _mm512_maskz_loadu_epi8((uint64_t{1} << (16 * left)) - 1, codes);
        h = _mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << left) - 1), heads);
      }
      __m512i lo = _mm512_and_si512(b, low), hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low);
      if constexpr (K == CodeKind::kIq4nl) {
        lo = _mm512_shuffle_epi8(table, lo);
        hi = _mm512_shuffle_epi8(table, hi);
      }
      const __m512i dot = DotAddUnsigned512(DotAddUnsigned512(off, lo, alo), hi, ahi);
      const __m512 d = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_cvtph_ps(h)));
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(d, as), facc[r]);
    }
  };
  for (int64_t st = 0; st < full; ++st) step(st, 4);
  if (full * 4 < groups) step(full, static_cast<int>(groups - full * 4));
  for (int r = 0; r < R; ++r) y[r0 + r * stride] = _mm512_reduce_add_ps(facc[r]);
}
#endif  // ORK_X86_DOT

#endif  // ORK_KERNELS_CPU_BLOCK32_DECODE_TILE_INL_H_
