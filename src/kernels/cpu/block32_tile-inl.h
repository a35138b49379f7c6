// The 32-weight block kinds' tile (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl;
// and i8 given its activations' floats): Block32Codes, Block32TileBody,
// Block32Tile. One SIMD target's worth. Not a header of its own:
// kernels/cpu/block_matmul-inl.h includes it inside its HWY_NAMESPACE once
// per target (Highway's -inl convention), after BlockRows, HeaderF16 and
// the IQ4_NL codebook. The toggle guard lets each target's pass include it
// again.
#if defined(ORK_KERNELS_CPU_BLOCK32_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ORK_KERNELS_CPU_BLOCK32_TILE_INL_H_
#undef ORK_KERNELS_CPU_BLOCK32_TILE_INL_H_
#else
#define ORK_KERNELS_CPU_BLOCK32_TILE_INL_H_
#endif

// The 32-weight block kinds (q80, q40, q41, q50, q51, iq4nl): an f16 d
// (and m) per group of 32. Codes inflate as i8's, i4's or i5's do (iq4nl's
// nibbles through its codebook, as nf4's); the offset kinds' codes less
// their offset, signed. Each group's int32 dot goes to float and meets
// d * (its activation block's scale) at once; q41's and q51's m meets the
// group's activation sum. On 256-bit targets a step's lanes hold two
// groups: in weight order (q80) each code vector is one group, in nibble
// order each 128-bit half is.
// i8 given its activations' floats runs here too, as q80 without headers:
// a group's float is its activation scale, the row's scale comes at the end.
template <CodeKind K>
constexpr bool kBlock32 = K == CodeKind::kQ80 || K == CodeKind::kQ40 || K == CodeKind::kQ41 || K == CodeKind::kQ50 ||
                          K == CodeKind::kQ51 || K == CodeKind::kIq4nl || K == CodeKind::kI8;

template <CodeKind K>
struct Block32Codes {
  static constexpr bool kRowScale = K == CodeKind::kI8;  // no headers: a scale per row
  static constexpr bool kWeightOrder = K == CodeKind::kQ80 || kRowScale;
  static constexpr bool kMins = K == CodeKind::kQ41 || K == CodeKind::kQ51;
  static constexpr CodeKind kBase = kWeightOrder                                    ? CodeKind::kI8
                                    : K == CodeKind::kQ50 || K == CodeKind::kQ51 ? CodeKind::kI5
                                                                                   : CodeKind::kI4;
  using Base = Codes<kBase>;
  static constexpr int64_t kHeader = kRowScale ? 0 : kMins ? 4 : 2;
  static constexpr int kOffset = K == CodeKind::kQ40 ? 8 : K == CodeKind::kQ50 ? 16 : 0;
  // x86's byte multiply (maddubs) takes one operand unsigned: there the
  // offset kinds' codes stay unsigned and the offset comes off each int32
  // lane as kOffset times the activations the lane covers (StepOffsets,
  // made once per token), instead of two sign fixes per code vector per
  // token. Elsewhere the codes are made signed as they load. The same
  // integers either way.
  static constexpr bool kOffsetLater = kOffset > 0 && (ORK_X86_256 || ORK_X86_128);
  // Nibble and 5-bit codes: a step's two pair sums add in int16 before they
  // widen (2 * 2 * 31 * 127 < 2^15); q80's and iq4nl's codes are too wide.
  static constexpr bool kAdd16 =
      K == CodeKind::kQ40 || K == CodeKind::kQ41 || K == CodeKind::kQ50 || K == CodeKind::kQ51;

  // The step's codes as int8 (signed kinds) or unsigned (q41, q51).
  static HWY_INLINE void LoadStep(const uint8_t* row0, const uint8_t* row1, int64_t g, VI8& c0, VI8& c1) {
    const DI8 di;
    typename Base::V b0, b1;
    Base::LoadStep(row0, row1, g, b0, b1);
    if constexpr (K == CodeKind::kIq4nl) {
      const auto table = hn::LoadDup128(DU8(), reinterpret_cast<const uint8_t*>(kIq4nlTable));
      c0 = hn::BitCast(di, hn::TableLookupBytes(table, b0));
      c1 = hn::BitCast(di, hn::TableLookupBytes(table, b1));
    } else if constexpr (kOffset > 0 && !kOffsetLater) {
      c0 = hn::Sub(hn::BitCast(di, b0), hn::Set(di, kOffset));
      c1 = hn::Sub(hn::BitCast(di, b1), hn::Set(di, kOffset));
    } else {
      c0 = hn::BitCast(di, b0);
      c1 = hn::BitCast(di, b1);
    }
  }

  static HWY_INLINE VI16 Pairs(VI8 c, VI8 a) {
    if constexpr (kMins || kOffsetLater) {
      return PairsUnsigned(hn::BitCast(DU8(), c), a);
    } else {
      return PairsSigned(c, a);
    }
  }
};

// kDot (ARM with the dot product): each int32 lane's four products summed
// by sdot, the same integers as the pair sums widened.
template <CodeKind K, int R, int T, bool kFar = false, bool kDot = false>
HWY_INLINE void Block32TileBody(const QuantWeights& w, const BlockActs& a, const int8_t* panel, int64_t r0, int t0,
                                float* y, int64_t ldy, int64_t stride = 1) {
  if constexpr (!kFar) stride = 1;
  using C = Block32Codes<K>;
  const DI8 di;
  const DI32 d32;
  const hn::Repartition<float, DI32> df;
  const BlockRows<K, R> rows(w, r0, stride);
  const int64_t b0 = rows.b0, b1 = rows.b1;
  const auto& row0 = rows.row0;
  const auto& row1 = rows.row1;
  const auto& hd = rows.headers;
  constexpr int64_t step0 = kPlane0StepBytes<C::kBase>, step1 = kPlane1StepBytes<C::kBase>;
  const int64_t ahead = kFar ? 0 : std::max<int64_t>(1, kSmallTilePrefetchBytes / (R * (b0 + b1)));
  const uint8_t* next0 = w.p0 + (r0 + R * ahead) * b0;
  hn::Vec<decltype(df)> facc[R][T];
  float mins[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      facc[r][t] = hn::Zero(df);
      mins[r][t] = 0.0f;
    }
  }
  // d * (activation block scale) of group g for token t, row r (i8: the
  // activation block's scale alone).
  auto scale_of = [&](int r, int t, int64_t g) HWY_ATTR {
    if constexpr (C::kRowScale) return a.scale[(t0 + t) * a.blocks + g];
    return HeaderF16(hd[r] + g * C::kHeader) * a.scale[(t0 + t) * a.blocks + g];
  };
  auto add_mins = [&](int r, int t, int64_t g) HWY_ATTR {
    if constexpr (C::kMins) {
      const int64_t at = (t0 + t) * a.blocks + g;
      mins[r][t] += HeaderF16(hd[r] + g * C::kHeader + 2) * a.group_acts[at];
    }
  };
  // Each int32 lane's products of one code vector against its activations
  // (x86's VNNI for the signed weight-order kinds, q80 and i8: the same
  // integers as the pair sums in one instruction less).
  auto lanes = [&](VI8 c, VI8 av) HWY_ATTR {
#if ORK_ARM_DOT
    if constexpr (kDot) return DotAdd(c, av, hn::Zero(d32));
#elif ORK_X86_DOT
    if constexpr (kDot && C::kWeightOrder) return DotAdd(c, av, hn::Zero(d32));
#endif
    return WidenAdd(C::Pairs(c, av), hn::Zero(d32));
  };
  // Both of a step's code vectors at once (the kAdd16 kinds: the pair sums
  // added in int16, widened once).
  auto step_lanes = [&](VI8 c0v, VI8 a0, VI8 c1v, VI8 a1) HWY_ATTR {
#if ORK_ARM_DOT
    if constexpr (kDot) return DotAdd(c1v, a1, DotAdd(c0v, a0, hn::Zero(d32)));
#endif
    return WidenAdd(hn::Add(C::Pairs(c0v, a0), C::Pairs(c1v, a1)), hn::Zero(d32));
  };
  const int64_t groups = w.k / 32, steps = groups / kStepGroups;
  // One step: its prefetch, its rows' codes, and every token against them;
  // wv: the rows' two weight scales as a vector (with step_scales), or
  // (scaled, one token) already times the token's two activation scales.
  auto step = [&](int64_t st, const hn::Vec<decltype(df)>* wv, bool scaled) HWY_ATTR {
    const int64_t g = st * kStepGroups;
    if constexpr (kFar) {
      for (int r = 0; r < R; ++r) {
        DecodeStreamPrefetch<step0>(row0[r], st, kDecodeNearBytes / R, kDecodeWindowBytes / R);
        if constexpr (step1 > 0) PrefetchSpan<step1>(row1[r] + b1 + st * step1);
        if (C::kHeader > 0 && st % 16 == 0) hwy::Prefetch(hd[r] + b1 + g * C::kHeader);
      }
    } else {
      PrefetchSpan<R * step0>(next0 + st * R * step0);
    }
    VI8 c0[R], c1[R];
    for (int r = 0; r < R; ++r) C::LoadStep(row0[r], row1[r], g, c0[r], c1[r]);
    const int8_t* p = panel + st * T * kStepBytes;
    for (int t = 0; t < T; ++t) {
      const VI8 av0 = hn::LoadU(di, p + t * kStepBytes), av1 = hn::LoadU(di, p + t * kStepBytes + kL);
      VI32 off = hn::Zero(d32);
      if constexpr (C::kOffsetLater) off = hn::LoadU(d32, a.step_offsets + ((t0 + t) * steps + st) * hn::Lanes(d32));
      for (int r = 0; r < R; ++r) {
        if constexpr (C::kAdd16) {
          // The step's int32 lanes at once: both pair sums, widened once, less the offset.
          const VI32 v = hn::Sub(step_lanes(c0[r], av0, c1[r], av1), off);
          if constexpr (kStepGroups == 1) {
            facc[r][t] = hn::MulAdd(hn::ConvertTo(df, v), hn::Set(df, scale_of(r, t, g)), facc[r][t]);
          } else {  // step_scales are always made for these kinds
            const auto sv =
                scaled ? wv[r] : hn::Mul(wv[r], hn::LoadU(df, a.step_scales + ((t0 + t) * steps + st) * hn::Lanes(df)));
            facc[r][t] = hn::MulAdd(hn::ConvertTo(df, v), sv, facc[r][t]);
          }
          for (int i = 0; i < kStepGroups; ++i) add_mins(r, t, g + i);
          continue;
        }
        const VI32 v0 = lanes(c0[r], av0), v1 = lanes(c1[r], av1);
        if constexpr (kStepGroups == 1) {
          facc[r][t] = hn::MulAdd(hn::ConvertTo(df, hn::Add(v0, v1)), hn::Set(df, scale_of(r, t, g)), facc[r][t]);
        } else if constexpr (C::kWeightOrder) {
          facc[r][t] = hn::MulAdd(hn::ConvertTo(df, v1), hn::Set(df, scale_of(r, t, g + 1)),
                                  hn::MulAdd(hn::ConvertTo(df, v0), hn::Set(df, scale_of(r, t, g)), facc[r][t]));
        } else if (a.step_scales != nullptr) {
          const auto sv =
              scaled ? wv[r] : hn::Mul(wv[r], hn::LoadU(df, a.step_scales + ((t0 + t) * steps + st) * hn::Lanes(df)));
          facc[r][t] = hn::MulAdd(hn::ConvertTo(df, hn::Add(v0, v1)), sv, facc[r][t]);
        } else {
          const hn::Half<decltype(df)> dh;
          const auto sv = hn::Combine(df, hn::Set(dh, scale_of(r, t, g + 1)), hn::Set(dh, scale_of(r, t, g)));
          facc[r][t] = hn::MulAdd(hn::ConvertTo(df, hn::Add(v0, v1)), sv, facc[r][t]);
        }
        for (int i = 0; i < kStepGroups; ++i) add_mins(r, t, g + i);
      }
    }
  };
  // The steps, each with its rows' two weight scales (with step_scales).
  // The kinds whose headers are a bare f16 d (q40, q50, iq4nl) lie side by
  // side: on 256-bit x86 eight groups' scales of a row convert in one
  // instruction, and four steps' worth run unrolled, each step's two
  // spread by one permute - instead of two scalar conversions, two
  // broadcasts and an insert a row a step, which were as many instructions
  // as the step's arithmetic, and of a test and a branch a step for where
  // the eight begin. One token (decode) meets its eight activation scales
  // there too, once for the four steps, instead of a multiply a row a
  // step. The same floats.
  const bool with_scales = kStepGroups == 2 && !C::kWeightOrder && (C::kAdd16 || a.step_scales != nullptr);
  int64_t st = 0;
#if ORK_X86_256
  constexpr bool kScales8 = kStepGroups == 2 && !C::kWeightOrder && C::kHeader == 2;
  if constexpr (kScales8) {
    alignas(32) static constexpr int32_t kSpread[4][8] = {
        {0, 0, 0, 0, 1, 1, 1, 1}, {2, 2, 2, 2, 3, 3, 3, 3}, {4, 4, 4, 4, 5, 5, 5, 5}, {6, 6, 6, 6, 7, 7, 7, 7}};
    // One token of a kind that adds in int16 (q40, q50): its activations
    // come in blocks of 32 (act_block), a scale a group - scale_of's
    // products, eight at a time.
    constexpr bool kScaled8 = T == 1 && C::kAdd16;
    if (with_scales && (!kScaled8 || a.blocks == groups)) {
      for (; st + 4 <= steps; st += 4) {
        __m256 scales8[R];
        for (int r = 0; r < R; ++r) {
          scales8[r] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(hd[r] + st * kStepGroups * 2)));
          if constexpr (kScaled8) {
            scales8[r] = _mm256_mul_ps(scales8[r], _mm256_loadu_ps(a.scale + t0 * a.blocks + st * kStepGroups));
          }
        }
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
          const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(kSpread[u]));
          hn::Vec<decltype(df)> wv[R];
          for (int r = 0; r < R; ++r) wv[r] = hn::Vec<decltype(df)>{_mm256_permutevar8x32_ps(scales8[r], idx)};
          step(st + u, wv, kScaled8);
        }
      }
    }
  }
#endif
  for (; st < steps; ++st) {
    hn::Vec<decltype(df)> wv[R];
    if (with_scales) {
      const int64_t g = st * kStepGroups;
      const hn::Half<decltype(df)> dh;
      for (int r = 0; r < R; ++r) {
        wv[r] = hn::Combine(df, hn::Set(dh, HeaderF16(hd[r] + (g + 1) * C::kHeader)),
                            hn::Set(dh, HeaderF16(hd[r] + g * C::kHeader)));
      }
    }
    step(st, wv, false);
  }
  if constexpr (kStepGroups == 2) {
    if (steps * 2 < groups) {  // the odd group, in weight order
      const int64_t g = steps * 2;
      for (int r = 0; r < R; ++r) {
        VI8 c;
        if constexpr (C::kWeightOrder) {
          c = C::Base::LoadGroup(row0[r], row1[r], g);
        } else {
          // Inflate through LoadStep's path on a copy of the group padded to a step.
          alignas(32) uint8_t n0[2 * kStepBytes] = {}, n1[64] = {};
          std::memcpy(n0, row0[r] + g * 16, 16);
          if constexpr (step1 > 0) std::memcpy(n1, row1[r] + g * 4, 4);
          VI8 lo, hi;
          C::LoadStep(n0, n1, 0, lo, hi);
          // Weight order of group g: its low-nibble lanes 0..15 then high 0..15.
          alignas(32) int8_t tmp0[kL], tmp1[kL], ordered[32];
          hn::Store(lo, di, tmp0);
          hn::Store(hi, di, tmp1);
          std::memcpy(ordered, tmp0, 16);
          std::memcpy(ordered + 16, tmp1, 16);
          c = hn::LoadU(di, ordered);
        }
        for (int t = 0; t < T; ++t) {
          const VI8 av = hn::LoadU(di, panel + steps * T * kStepBytes + t * 32);
          const auto dv = hn::Set(df, scale_of(r, t, g));
          VI32 v = lanes(c, av);
          if constexpr (C::kOffsetLater) {
            v = hn::Sub(v, WidenAdd(PairsUnsigned(hn::Set(DU8(), static_cast<uint8_t>(C::kOffset)), av), hn::Zero(d32)));
          }
          facc[r][t] = hn::MulAdd(hn::ConvertTo(df, v), dv, facc[r][t]);
          add_mins(r, t, g);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const int64_t row = r0 + r * stride;
    const float ws = C::kRowScale ? w.scales[row] * w.scale_mul : 1.0f;
    for (int t = 0; t < T; ++t) {
      const float sum = hn::GetLane(hn::SumOfLanes(df, facc[r][t])) + mins[r][t];
      y[(t0 + t) * ldy + row] = C::kRowScale ? ws * sum : sum;
    }
  }
}

// Block32Tile as a call of its own (the body inlines into decode's row loop).
template <CodeKind K, int R, int T, bool kFar = false, bool kDot = false>
HWY_NOINLINE void Block32Tile(const QuantWeights& w, const BlockActs& a, const int8_t* panel, int64_t r0, int t0,
                              float* y, int64_t ldy, int64_t stride = 1) {
  Block32TileBody<K, R, T, kFar, kDot>(w, a, panel, r0, t0, y, ldy, stride);
}

#endif  // ORK_KERNELS_CPU_BLOCK32_TILE_INL_H_
