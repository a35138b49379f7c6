// The batch tile on AVX-512 VNNI (the AVX3_VNNI target), one SIMD target's
// worth. Not a header of its own: kernels/cpu/quant_matmul.cc includes it
// inside its HWY_NAMESPACE once per target (Highway's -inl convention),
// after the code inflation and activation panels it builds on; it holds
// code only where ORK_X86_DOT is set (the AVX3 targets). The toggle guard
// lets each target's pass include it again.
#if defined(ORK_KERNELS_CPU_WIDE_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ORK_KERNELS_CPU_WIDE_TILE_INL_H_
#undef ORK_KERNELS_CPU_WIDE_TILE_INL_H_
#else
#define ORK_KERNELS_CPU_WIDE_TILE_INL_H_
#endif

#if ORK_X86_DOT
// acc + each int32 lane's four unsigned-by-signed byte products, 512 bits.
HWY_INLINE __m512i DotAddUnsigned512(__m512i acc, __m512i u, __m512i s) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
  return acc;
}
// acc + each int32 lane's two int16 products (vpdpwssd), 512 bits.
HWY_INLINE __m512i PairsDotAdd512(__m512i acc, __m512i p, __m512i s) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(p), "v"(s));
  return acc;
}

// Tile's 1 x T batch tile on AVX-512 VNNI: a step's two code vectors side
// by side in one 512-bit register meet a token's whole step of activations
// (the panel holds them so: 64 bytes), one vpdpbusd per token and step
// where Tile issues two; even and odd steps sum into separate registers,
// so a token's chain waits on every other instruction only. The same
// integers as Tile. llama-1b's i4 rows, K = 2048, one thread
// (ork-kernels-bench, interleaved with --target=AVX3): see docs/BENCHMARKS.md.
// R rows share each activation load: a core issues one 512-bit vpdpbusd
// and about one 512-bit load a cycle, so with one row a tile of eight
// tokens waited on its nine loads a step, and where the panel outgrows L1
// (K > 4096 at eight tokens: a down projection) on L2 - two rows took
// i4 at M = 64 from 150 to 184 GMAC/s at K = 2048 and from 95 to 170 at
// K = 8192, against the core's 230 (BM_VpdpbusdPeak; docs/BENCHMARKS.md
// 13.4). Tokens from nt on are padding (zeros in the panel): summed with
// the others, never written.
template <CodeKind K, int T, int R = 1>
HWY_NOINLINE void TileWide(const QuantWeights& w, const QuantActs& a, const int8_t* panel, int64_t r0, int t0, float* y,
                           int64_t ldy, int nt = T) {
  static_assert(T % 4 == 0, "the lane sums are taken four tokens at a time");
  static_assert(R * T <= 16, "the sums must stay in registers beside the codes");
  // Few sums take even and odd steps apart, so a chain waits on every
  // other instruction; sixteen are far enough apart on their own.
  constexpr bool kSplit = R * T <= 8;
  using C = TileCodes<K, true>;
  const DI8 di;
  const DI32 d32;
  const CodeRows<K, R> rows(w, r0, 1);
  const int64_t b0 = rows.b0, b1 = rows.b1;
  const auto& row0 = rows.row0;
  const auto& row1 = rows.row1;
  constexpr int64_t step0 = kPlane0StepBytes<K>, step1 = kPlane1StepBytes<K>;
  const int64_t ahead = std::max<int64_t>(1, kSmallTilePrefetchBytes / (R * (b0 + b1)));
  const uint8_t* next0 = w.p0 + (r0 + R * ahead) * b0;
  const uint8_t* next1 = b1 > 0 ? w.p1 + (r0 + R * ahead) * b1 : nullptr;
  __m512i even[R][T], odd[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) even[r][t] = odd[r][t] = _mm512_setzero_si512();
  }
  const int64_t groups = w.k / 32, steps = groups / kStepGroups;
  auto step = [&](int64_t st, __m512i (*acc)[T]) HWY_ATTR {
    PrefetchSpan<R * step0>(next0 + st * R * step0);
    if constexpr (step1 > 0) PrefetchSpan<R * step1>(next1 + st * R * step1);
    __m512i codes[R];
    __mmask64 negative[R];
    for (int r = 0; r < R; ++r) {
      typename C::V c0, c1;
      C::LoadStep(row0[r], row1[r], st * kStepGroups, c0, c1);
      codes[r] = _mm512_inserti64x4(_mm512_castsi256_si512(c0.raw), c1.raw, 1);
      negative[r] = 0;
      if constexpr (!C::kUnsigned) {  // |w| against a with w's sign
        negative[r] = _mm512_movepi8_mask(codes[r]);
        codes[r] = _mm512_abs_epi8(codes[r]);
      }
    }
    const int8_t* p = panel + st * T * kStepBytes;
    for (int t = 0; t < T; ++t) {
      const __m512i av = _mm512_loadu_si512(p + t * kStepBytes);
      for (int r = 0; r < R; ++r) {
        __m512i sv = av;
        if constexpr (!C::kUnsigned) sv = _mm512_mask_sub_epi8(av, negative[r], _mm512_setzero_si512(), av);
        acc[r][t] = DotAddUnsigned512(acc[r][t], codes[r], sv);
      }
    }
  };
  int64_t st = 0;
  for (; st + 2 <= steps; st += 2) {
    step(st, even);
    step(st + 1, kSplit ? odd : even);
  }
  if (st < steps) step(st, even);
  // The T tokens' lane sums four at a time: each register folded to 256
  // bits, then horizontal adds across four of them (as Tile's four rows) -
  // a row of a short matrix (K = 512 or 768: MoE experts' downs) has only
  // 8 or 12 steps, and separate reductions cost as much as a third of them.
  alignas(16) int32_t dots[R][T];
  for (int r = 0; r < R; ++r) {
    for (int tg = 0; tg < T; tg += 4) {
      __m256i half[4];
      for (int i = 0; i < 4; ++i) {
        const __m512i v = _mm512_add_epi32(even[r][tg + i], odd[r][tg + i]);
        half[i] = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
      }
      const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(half[0], half[1]), _mm256_hadd_epi32(half[2], half[3]));
      _mm_store_si128(reinterpret_cast<__m128i*>(&dots[r][tg]),
                      _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
    }
  }
  if constexpr (kStepGroups == 2) {
    if (steps * kStepGroups < groups) {  // the odd group
      for (int r = 0; r < R; ++r) {
        const typename C::V c = C::LoadGroup(row0[r], row1[r], steps * kStepGroups);
        for (int t = 0; t < T; ++t) {
          const auto av = hn::LoadU(di, panel + steps * T * kStepBytes + t * 32);
          dots[r][t] += static_cast<int32_t>(hn::GetLane(hn::SumOfLanes(d32, MacInto<C, true>(c, av, hn::Zero(d32)))));
        }
      }
    }
  }
  // Four tokens at a time: the offset's correction, the conversion and the
  // two scales in 128-bit lanes (the same operations in the same order as
  // one token at a time), then each token's R adjacent outputs stored
  // together. A scalar epilogue spent about as many floating-point
  // instructions as a short row's steps have vpdpbusd.
  for (int tg = 0; tg < T; tg += 4) {
    const int valid = std::min(4, nt - tg);  // tokens from nt on: padding
    if (valid <= 0) break;
    // A group with padding reads only its tokens' scales and sums: the
    // arrays end at the batch's last token.
    alignas(16) float scale_buf[4] = {};
    alignas(16) int32_t sum_buf[4] = {};
    const float* scales = a.scale + t0 + tg;
    const int32_t* sums = C::kUnsigned ? a.sum + t0 + tg : nullptr;
    if (valid < 4) {
      std::copy_n(scales, valid, scale_buf);
      if constexpr (C::kUnsigned) std::copy_n(sums, valid, sum_buf);
      scales = scale_buf;
      sums = sum_buf;
    }
    __m128 out[R];
    const __m128 as = _mm_loadu_ps(scales);
    __m128i offset_sums = _mm_setzero_si128();
    if constexpr (C::kUnsigned) {
      offset_sums = _mm_mullo_epi32(_mm_set1_epi32(C::kOffset), _mm_loadu_si128(reinterpret_cast<const __m128i*>(sums)));
    }
    for (int r = 0; r < R; ++r) {
      __m128i dot = _mm_load_si128(reinterpret_cast<const __m128i*>(&dots[r][tg]));
      if constexpr (C::kUnsigned) dot = _mm_sub_epi32(dot, offset_sums);
      const __m128 scale = _mm_mul_ps(_mm_set1_ps(w.scales[r0 + r] * w.scale_mul), as);
      out[r] = _mm_mul_ps(scale, _mm_cvtepi32_ps(dot));
    }
    float* yt = y + static_cast<int64_t>(t0 + tg) * ldy + r0;
    if constexpr (R == 4) {
      _MM_TRANSPOSE4_PS(out[0], out[1], out[2], out[3]);
      for (int i = 0; i < valid; ++i) _mm_storeu_ps(yt + i * ldy, out[i]);
    } else if constexpr (R == 2) {
      const __m128 lo = _mm_unpacklo_ps(out[0], out[1]), hi = _mm_unpackhi_ps(out[0], out[1]);
      const __m128 pair[4] = {lo, _mm_movehl_ps(lo, lo), hi, _mm_movehl_ps(hi, hi)};
      for (int i = 0; i < valid; ++i) _mm_storel_pi(reinterpret_cast<__m64*>(yt + i * ldy), pair[i]);
    } else {
      alignas(16) float v[R][4];
      for (int r = 0; r < R; ++r) _mm_store_ps(v[r], out[r]);
      for (int i = 0; i < valid; ++i) {
        for (int r = 0; r < R; ++r) yt[i * ldy + r] = v[r][i];
      }
    }
  }
}
#endif  // ORK_X86_DOT

#endif  // ORK_KERNELS_CPU_WIDE_TILE_INL_H_
