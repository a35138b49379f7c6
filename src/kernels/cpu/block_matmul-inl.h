// The block kinds' matmul (the carried tiers: quant/carry.h), one SIMD
// target's worth. Not a header of its own: kernels/cpu/quant_matmul.cc
// includes it inside its HWY_NAMESPACE once per target (Highway's -inl
// convention), after the code inflation, pair products and activation
// panels it builds on, and dispatches the block kinds to MatmulBlockKind.
// The toggle guard lets each target's pass include it again.
#if defined(ORK_KERNELS_CPU_BLOCK_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ORK_KERNELS_CPU_BLOCK_MATMUL_INL_H_
#undef ORK_KERNELS_CPU_BLOCK_MATMUL_INL_H_
#else
#define ORK_KERNELS_CPU_BLOCK_MATMUL_INL_H_
#endif

// ---------------------------------------------------------------------------
// The block kinds (q4k, q6k, ...: a GGUF K-quant's codes and scales
// carried exactly). Codes inflate as i4's and i6's do (q6k's then less 32,
// signed; q3k's from a 2-bit and a bit plane, less 4);
// each pair sum meets its sub-block's integer scale in the widening
// multiply-add (pmaddwd against the scales instead of ones), so a
// super-block's 256 weights sum exactly in int32; at its end the int32
// lanes go to float and meet d. q4k's mins come off once per row: dmin
// times the integer sum of m times each group's activation sum.

// IQ4_NL's codebook (iq4nl, iq4xs), as int8 levels for a byte shuffle.
alignas(16) constexpr int8_t kIq4nlTable[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The kinds whose sub-scales are unsigned (q4k's and q5k's six bits,
// q2k's nibbles): a step's scales need no sign extension.
template <CodeKind K>
constexpr bool kUnsignedScales = K == CodeKind::kQ4k || K == CodeKind::kQ5k || K == CodeKind::kQ2k;

// The scale byte each int16 lane of a step's code vector takes, as an index
// into the super-block's sub-scales (broadcast to every 128-bit block): in
// the high byte of the lane for the signed kinds (0x80 zeroes the low one;
// a shift right by 8 then sign-extends it), in the low byte for the
// unsigned ones (0x80 zeroes the high one: the lane is the scale, no
// shift - an instruction less a row a step). Lane byte p of code vector
// `half` (c0, c1) of step s covers group s * kStepGroups + p / 16, its
// first (c0) or second (c1) 16 weights: q4k takes the group's scale, q6k,
// q3k and q2k the 16-weight sub-block's.
template <CodeKind K>
struct BlockScaleTables {
  static constexpr int kSteps = static_cast<int>(kSuperBlock / 32 / kStepGroups);
  uint8_t idx[kSteps][2][kL];
  constexpr BlockScaleTables() : idx{} {
    for (int st = 0; st < kSteps; ++st) {
      for (int half = 0; half < 2; ++half) {
        for (size_t p = 0; p < kL; ++p) {
          const int group = st * kStepGroups + static_cast<int>(p / 16);
          const int sub = K == CodeKind::kQ6k || K == CodeKind::kQ3k || K == CodeKind::kQ2k ? 2 * group + half : group;
          const size_t at = kUnsignedScales<K> ? 0 : 1;  // the lane's byte that takes the scale
          idx[st][half][p] = p % 2 == at ? static_cast<uint8_t>(sub) : 0x80;
        }
      }
    }
  }
};
template <CodeKind K>
alignas(32) constexpr BlockScaleTables<K> kBlockScales{};

// acc + sum of adjacent pairs of p * s (int16 -> int32). With AVX-512 VNNI
// one vpdpwssd (EVEX, as DotAddUnsigned) in place of madd and add: the same
// wrapping int32 sums. The super-block kinds' batch tiles make a token's
// step of two such; Zen 5 (session 49), `BM_QuantMatmul/kind:*/M:64/K:2048`
// best of 20 alternated: q3_K 1.26x, iq4_xs 1.24x, q5_K 1.13x, q2_K 1.02x.
HWY_INLINE VI32 ScaledWidenAdd(VI16 p, VI16 s, VI32 acc) {
#if ORK_X86_DOT
  __m256i r = acc.raw;
  asm("vpdpwssd %2, %1, %0" : "+v"(r) : "v"(p.raw), "v"(s.raw));
  return VI32{r};
#elif ORK_X86_256
  return hn::Add(acc, VI32{_mm256_madd_epi16(p.raw, s.raw)});
#elif ORK_X86_128
  return hn::Add(acc, VI32{_mm_madd_epi16(p.raw, s.raw)});
#else
  const DI32 d32;
  const auto p32 = hn::BitCast(d32, p), s32 = hn::BitCast(d32, s);
  const auto even = hn::Mul(hn::ShiftRight<16>(hn::ShiftLeft<16>(p32)), hn::ShiftRight<16>(hn::ShiftLeft<16>(s32)));
  const auto odd = hn::Mul(hn::ShiftRight<16>(p32), hn::ShiftRight<16>(s32));
  return hn::Add(acc, hn::Add(even, odd));
#endif
}

// A header's f16 scale: F16C's conversion where the target has it (every
// x86 target from AVX2 up), AArch64's FCVT (every ARMv8 core), else the
// portable one - all exact, the same floats. The portable one is a dozen
// instructions with branches and a loop for subnormals: on the NEON
// target GCC then kept the tile's rows in a loop and its sums and codes
// in memory, a load and a store a group (25 instructions a group beside
// the two sdot, in the q4_0 decode loop).
HWY_INLINE float HeaderF16(const uint8_t* p) {
#if ORK_X86_256
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
#elif HWY_ARCH_ARM_A64
  __fp16 h;
  std::memcpy(&h, p, 2);
  return static_cast<float>(h);
#else
  return load_f16_at(p);
#endif
}

// q4k's and q5k's mins: a super-block's eight dmin * m (one per group) as
// floats, in kMinVecs vectors, to meet each token's eight group sums times
// their activation scale (BlockActs::group_acts) in one multiply-add per
// vector, subtracted straight from the token's float accumulator (whose
// lanes are summed at the end anyway): no reduction per block.
constexpr size_t kFloatLanes = kL / 4;
constexpr int kMinVecs = static_cast<int>(8 / kFloatLanes);
template <class DF>
HWY_INLINE void BlockMins(DF df, const uint8_t* header, hn::Vec<DF>* out) {
  const hn::Rebind<uint8_t, DF> d8;
  const hn::Rebind<int32_t, DF> d32;
  const auto dmin = hn::Set(df, HeaderF16(header + 2));
  for (int i = 0; i < kMinVecs; ++i) {
    out[i] = hn::Mul(hn::ConvertTo(df, hn::PromoteTo(d32, hn::LoadU(d8, header + 12 + i * kFloatLanes))), dmin);
  }
}

// q3k's codes for the step at group g (c0, c1 as Codes::LoadStep's): the
// low two bits from the step's 16 bytes of its 2-bit plane (quant/tier.h:
// shifts 0, 2 give the first 16 weights of groups g, g + 1, shifts 4, 6
// their last 16), the third from the bit plane as i5's fifth. On 256-bit
// targets the 16 bytes fill both halves and the upper half shifts 2 more.
alignas(32) constexpr uint8_t kUpperHalf[32] = {0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
                                                0,    0,    0,    0,    0,    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                                0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};

// The step's low two bits alone (q2k's whole codes).
HWY_INLINE void LoadLow2Step(const uint8_t* row0, int64_t g, VU8& c0, VU8& c1) {
  const DU8 du;
  const auto three = hn::Set(du, 3);
  const auto v = hn::LoadDup128(du, row0 + (g / 2) * 16);
  if constexpr (kL == 32) {
    const auto upper = hn::MaskFromVec(hn::Load(du, kUpperHalf));
    c0 = hn::And(hn::IfThenElse(upper, hn::ShiftRight<2>(v), v), three);
    c1 = hn::And(hn::IfThenElse(upper, hn::ShiftRight<6>(v), hn::ShiftRight<4>(v)), three);
  } else if (g % 2 == 0) {
    c0 = hn::And(v, three);
    c1 = hn::And(hn::ShiftRight<4>(v), three);
  } else {
    c0 = hn::And(hn::ShiftRight<2>(v), three);
    c1 = hn::And(hn::ShiftRight<6>(v), three);
  }
}

HWY_INLINE void LoadQ3kStep(const uint8_t* row0, const uint8_t* row1, int64_t g, VU8& c0, VU8& c1) {
  const DU8 du;
  LoadLow2Step(row0, g, c0, c1);
  VU8 bits;
  if constexpr (kL == 32) {
    uint64_t b;
    std::memcpy(&b, row1 + g * 4, 8);
    bits = hn::BitCast(du, hn::Set(hn::Repartition<uint64_t, DU8>(), b));
  } else {
    uint32_t b;
    std::memcpy(&b, row1 + g * 4, 4);
    bits = hn::BitCast(du, hn::Set(hn::Repartition<uint32_t, DU8>(), b));
  }
  const auto bit = hn::Load(du, kI5Bit), four = hn::Set(du, 4);
  c0 = hn::Or(c0, hn::IfThenElseZero(hn::TestBit(hn::TableLookupBytes(bits, hn::Load(du, kI5StepByte[0])), bit), four));
  c1 = hn::Or(c1, hn::IfThenElseZero(hn::TestBit(hn::TableLookupBytes(bits, hn::Load(du, kI5StepByte[1])), bit), four));
}

template <CodeKind K>
struct BlockCodes {
  // q4k and q5k: a sub-scale and a min per 32 weights; iq4xs: a signed
  // sub-scale per 32 over codebook levels; q6k and q3k: one per 16.
  static constexpr bool kMins = K == CodeKind::kQ4k || K == CodeKind::kQ5k;
  // q2k: a scale and a min per 16 weights, a nibble each.
  static constexpr bool kSubMins = K == CodeKind::kQ2k;
  static constexpr bool kSub32 = K != CodeKind::kQ6k && K != CodeKind::kQ3k && !kSubMins;
  static constexpr CodeKind kBase = K == CodeKind::kQ5k ? CodeKind::kI5 : K == CodeKind::kQ6k ? CodeKind::kI6 : CodeKind::kI4;
  using Base = Codes<kBase>;
  static constexpr int64_t kHeader = kMins      ? kQ4kHeaderBytes
                                     : kSubMins ? kQ2kHeaderBytes
                                     : kSub32   ? kIq4xsHeaderBytes
                                                : kQ6kHeaderBytes;
  static constexpr int64_t kScalesAt = kMins || kSubMins ? 4 : 2;  // within a header
  static constexpr int kOffset = K == CodeKind::kQ3k ? 4 : 32;  // q3k, q6k: unsigned codes less this
  // q6k and q3k multiply their unsigned codes (one maddubs, no sign
  // tricks) and take the offset off once per super-block: kOffset * the
  // sub-scales against each token's sums of 16 activations.
  static constexpr bool kOffsetSums = K == CodeKind::kQ6k || K == CodeKind::kQ3k;
  // Plane bytes of one row per step.
  static constexpr int64_t kStep0 = K == CodeKind::kQ3k || kSubMins ? 8 * kStepGroups : kPlane0StepBytes<kBase>;
  static constexpr int64_t kStep1 = K == CodeKind::kQ3k ? 4 * kStepGroups : kSubMins ? 0 : kPlane1StepBytes<kBase>;

  static HWY_INLINE void LoadStep(const uint8_t* row0, const uint8_t* row1, int64_t g, VU8& c0, VU8& c1) {
    if constexpr (K == CodeKind::kQ3k) {
      LoadQ3kStep(row0, row1, g, c0, c1);
    } else if constexpr (kSubMins) {
      LoadLow2Step(row0, g, c0, c1);
    } else {
      Base::LoadStep(row0, row1, g, c0, c1);
    }
  }

  // The codes as the signed bytes they stand for (iq4xs through its
  // codebook; the rest are small and unsigned), for the dot product.
  static HWY_INLINE VI8 Signed(VU8 c) {
    if constexpr (K == CodeKind::kIq4xs) {
      const auto table = hn::LoadDup128(DU8(), reinterpret_cast<const uint8_t*>(kIq4nlTable));
      return hn::BitCast(DI8(), hn::TableLookupBytes(table, c));
    } else {
      return hn::BitCast(DI8(), c);
    }
  }

  // Pair sums of the step's two code vectors against their activations.
  static HWY_INLINE void Pairs(VU8 c, VI8 a, VI16& p) {
    if constexpr (kMins || kSubMins) {
      p = PairsUnsigned(c, a);
    } else if constexpr (K == CodeKind::kIq4xs) {
      const auto table = hn::LoadDup128(DU8(), reinterpret_cast<const uint8_t*>(kIq4nlTable));
      p = PairsSigned(hn::BitCast(DI8(), hn::TableLookupBytes(table, c)), a);
    } else {
      static_assert(kOffsetSums, "signed codes with an offset");
      p = PairsUnsigned(c, a);  // 2 * 63 * 127 < 2^15
    }
  }

  // acc less kOffset * sum over the super-block's sixteen sub-blocks of
  // sc * (the token's activation sum over them): `neg` holds -kOffset * sc
  // as int16 (|32 * 128| < 2^15), `sums` the token's sixteen sums.
  static HWY_INLINE VI32 TakeOffset(const VI16* neg, const int16_t* sums, VI32 acc) {
    const DI16 d16;
    for (size_t i = 0; i * hn::Lanes(d16) < 16; ++i) acc = ScaledWidenAdd(hn::LoadU(d16, sums + i * hn::Lanes(d16)), neg[i], acc);
    return acc;
  }
  // q2k's sixteen mins (the high nibbles) as int16, and their sum against a
  // token's sixteen activation sums.
  static HWY_INLINE void SubMins(const uint8_t* header, VI16* m) {
    const DI16 d16;
    const hn::Rebind<uint8_t, DI16> d8;
    for (size_t i = 0; i * hn::Lanes(d16) < 16; ++i) {
      m[i] = hn::BitCast(d16, hn::PromoteTo(hn::Rebind<uint16_t, decltype(d8)>(),
                                            hn::ShiftRight<4>(hn::LoadU(d8, header + kScalesAt + i * hn::Lanes(d16)))));
    }
  }
  static HWY_INLINE VI32 MinsOf(const VI16* m, const int16_t* sums) {
    const DI16 d16;
    VI32 acc = hn::Zero(DI32());
    for (size_t i = 0; i * hn::Lanes(d16) < 16; ++i) acc = ScaledWidenAdd(hn::LoadU(d16, sums + i * hn::Lanes(d16)), m[i], acc);
    return acc;
  }
  static HWY_INLINE void OffsetScales(const uint8_t* header, VI16* neg) {
    const DI16 d16;
    const hn::Rebind<int8_t, DI16> d8;
    for (size_t i = 0; i * hn::Lanes(d16) < 16; ++i) {
      const auto sc = hn::PromoteTo(d16, hn::LoadU(d8, reinterpret_cast<const int8_t*>(header + kScalesAt) + i * hn::Lanes(d16)));
      neg[i] = hn::Mul(sc, hn::Set(d16, static_cast<int16_t>(-kOffset)));
    }
  }

  // The super-block's sub-scales in every 128-bit block.
  static HWY_INLINE VU8 ScaleSource(const uint8_t* header) {
    const DU8 du;
    if constexpr (kSub32) {
      uint64_t v;
      std::memcpy(&v, header + kScalesAt, 8);
      return hn::BitCast(du, hn::Set(hn::Repartition<uint64_t, DU8>(), v));
    } else if constexpr (kSubMins) {
      return hn::And(hn::LoadDup128(du, header + kScalesAt), hn::Set(du, 0x0F));  // the scale nibbles
    } else {
      return hn::LoadDup128(du, header + kScalesAt);
    }
  }

  static HWY_INLINE VI16 StepScales(VU8 source, int st, int half) {
    const DU8 du;
    const auto bytes = hn::TableLookupBytesOr0(source, hn::Load(du, kBlockScales<K>.idx[st][half]));
    if constexpr (kUnsignedScales<K>) return hn::BitCast(DI16(), bytes);
    return hn::ShiftRight<8>(hn::BitCast(DI16(), bytes));
  }
};

// The block kinds' activations (ref::block_acts): each token's int8 codes
// in act_block(kind) blocks with a scale each, and for the kinds with mins
// (q4k, q5k, q41, q51) each group of 32 codes' sum times its block's scale.
struct BlockActs {
  const float* scale = nullptr;       // [token][block]
  const float* group_acts = nullptr;  // [token][group]
  const int16_t* sub_sums = nullptr;  // q6k, q3k: [token][k / 16], each 16 codes' sum
  int64_t blocks = 0;                 // per token
  // Batches of a 32-weight kind in nibble order with two groups a step:
  // each token's activation scales of a step's two groups, one per half of
  // a float vector ([token][step][lanes]), made once for every row.
  const float* step_scales = nullptr;
  // The offset kinds on x86 (Block32Codes::kOffsetLater): each token's
  // kOffset times the activations under each int32 lane of each step
  // ([token][step][lanes]).
  const int32_t* step_offsets = nullptr;
  // AVX-512 VNNI's sixteen-row tile (Rows16Dot): minus kOffset times
  // each group's activations, [token][group].
  const int32_t* group_offsets = nullptr;
};

// The R rows a block kind's tile reads (rows r0 + r * stride): their two
// planes and where their headers start, and the planes' bytes per row.
template <CodeKind K, int R>
struct BlockRows {
  int64_t b0, b1;
  const uint8_t* row0[R];
  const uint8_t* row1[R];
  const uint8_t* headers[R];
  HWY_INLINE BlockRows(const QuantWeights& w, int64_t r0, int64_t stride)
      : b0(plane0_row_bytes(K, w.k)), b1(plane1_row_bytes(K, w.k)) {
    const int64_t headers_at = block_kind(K) ? block_headers_offset(K, w.k) : 0;
    for (int r = 0; r < R; ++r) {
      row0[r] = w.p0 + (r0 + r * stride) * b0;
      row1[r] = w.p1 + (r0 + r * stride) * b1;
      headers[r] = row1[r] + headers_at;
    }
  }
};

// kDot (ARM with the dot product): each int32 lane's four products summed
// by sdot and multiplied by its sub-block's scale, the same integers as the
// pair sums scaled in pairs (a lane's four bytes share one sub-block).
template <CodeKind K, int R, int T, bool kFar = false, bool kDot = false>
HWY_INLINE void BlockTileBody(const QuantWeights& w, const BlockActs& a, const int8_t* panel, int64_t r0, int t0,
                              float* y, int64_t ldy, int64_t stride = 1) {
  if constexpr (!kFar) stride = 1;
  using C = BlockCodes<K>;
  const DI8 di;
  const DI32 d32;
  const hn::Repartition<float, DI32> df;
  const BlockRows<K, R> rows(w, r0, stride);
  const int64_t b0 = rows.b0, b1 = rows.b1;
  const auto& row0 = rows.row0;
  const auto& row1 = rows.row1;
  const auto& headers = rows.headers;
  constexpr int64_t step0 = C::kStep0, step1 = C::kStep1;
  const int64_t ahead = kFar ? 0 : std::max<int64_t>(1, kSmallTilePrefetchBytes / (R * (b0 + b1)));
  const uint8_t* next0 = w.p0 + (r0 + R * ahead) * b0;
  const uint8_t* next1 = w.p1 + (r0 + R * ahead) * b1;

  hn::Vec<decltype(df)> facc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) facc[r][t] = hn::Zero(df);
  }
  constexpr int kSteps = BlockScaleTables<K>::kSteps;
  const int64_t blocks = w.k / kSuperBlock;
  for (int64_t b = 0; b < blocks; ++b) {
    VI32 acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) acc[r][t] = hn::Zero(d32);
    }
    VU8 source[R];
    for (int r = 0; r < R; ++r) {
      source[r] = C::ScaleSource(headers[r] + b * C::kHeader);
      if constexpr (kFar) hwy::Prefetch(headers[r] + b1 + b * C::kHeader);
    }
    for (int st = 0; st < kSteps; ++st) {
      const int64_t at_step = b * kSteps + st;
      const int64_t g = at_step * kStepGroups;
      if constexpr (kFar) {
        for (int r = 0; r < R; ++r) {
          DecodeStreamPrefetch<step0>(row0[r], at_step, kDecodeNearBytes / R, kDecodeWindowBytes / R);
          if constexpr (step1 > 0) PrefetchSpan<step1>(row1[r] + b1 + at_step * step1);
        }
      } else {
        PrefetchSpan<R * step0>(next0 + at_step * R * step0);
        PrefetchSpan<R * (step1 > 0 ? step1 : 8)>(next1 + at_step * R * (step1 > 0 ? step1 : 8));
      }
      // Row by row: a row's codes and scales meet every token before the
      // next row's inflate. Decode's two rows side by side had kept both
      // rows' codes, scales and sums live at once - more than AVX2's sixteen
      // registers, so GCC put the two int32 sums on the stack, a store and
      // a reload in their chains every step. With this order and i6's high
      // bits by lookup (AddHighBits) q6_K's decode loop spills nothing.
      const int8_t* p = panel + at_step * T * kStepBytes;
      for (int r = 0; r < R; ++r) {
        VU8 c0, c1;
        C::LoadStep(row0[r], row1[r], g, c0, c1);
        const VI16 s0 = C::StepScales(source[r], st, 0);
        const VI16 s1 = C::kSub32 ? s0 : C::StepScales(source[r], st, 1);
        // The dot product's scales as int32 lanes, once a step: a scale
        // vector's two int16 halves of each lane are equal, so the high one, widened.
        [[maybe_unused]] const VI32 w0 = hn::ShiftRight<16>(hn::BitCast(d32, s0));
        [[maybe_unused]] const VI32 w1 = hn::ShiftRight<16>(hn::BitCast(d32, s1));
        for (int t = 0; t < T; ++t) {
          const VI8 av0 = hn::LoadU(di, p + t * kStepBytes), av1 = hn::LoadU(di, p + t * kStepBytes + kL);
#if ORK_ARM_DOT
          if constexpr (kDot) {
            if constexpr (C::kMins) {
              const VI32 v = DotAdd(C::Signed(c1), av1, DotAdd(C::Signed(c0), av0, hn::Zero(d32)));
              acc[r][t] = hn::Add(acc[r][t], hn::Mul(v, w0));
            } else {
              const VI32 v0 = DotAdd(C::Signed(c0), av0, hn::Zero(d32));
              const VI32 v1 = DotAdd(C::Signed(c1), av1, hn::Zero(d32));
              acc[r][t] = hn::Add(acc[r][t], hn::Add(hn::Mul(v0, w0), hn::Mul(v1, w1)));
            }
            continue;
          }
#endif
          VI16 q0, q1;
          C::Pairs(c0, av0, q0);
          C::Pairs(c1, av1, q1);
          if constexpr (C::kMins) {
            // One sub-scale for both halves and small unsigned codes: the
            // two pair sums add in int16 (2 * 2 * 31 * 127 < 2^15) and
            // widen once.
            acc[r][t] = ScaledWidenAdd(hn::Add(q0, q1), s0, acc[r][t]);
          } else {
            acc[r][t] = ScaledWidenAdd(q1, s1, ScaledWidenAdd(q0, s0, acc[r][t]));
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const uint8_t* h = headers[r] + b * C::kHeader;
      const float d = HeaderF16(h);
      hn::Vec<decltype(df)> mins[kMinVecs];
      if constexpr (C::kMins) BlockMins(df, h, mins);
      if constexpr (C::kOffsetSums) {
        VI16 neg[16 / (kL / 2)];
        C::OffsetScales(h, neg);
        for (int t = 0; t < T; ++t) {
          acc[r][t] = C::TakeOffset(neg, a.sub_sums + (t0 + t) * (w.k / 16) + b * 16, acc[r][t]);
        }
      }
      VI16 m16[16 / (kL / 2)];
      if constexpr (C::kSubMins) C::SubMins(h, m16);
      for (int t = 0; t < T; ++t) {
        const float as = a.scale[(t0 + t) * a.blocks + b];
        facc[r][t] = hn::MulAdd(hn::ConvertTo(df, acc[r][t]), hn::Set(df, d * as), facc[r][t]);
        if constexpr (C::kSubMins) {
          // q2k: dmin * as * (the sixteen mins against the token's sums of 16).
          const VI32 mi = C::MinsOf(m16, a.sub_sums + (t0 + t) * (w.k / 16) + b * 16);
          facc[r][t] = hn::NegMulAdd(hn::ConvertTo(df, mi), hn::Set(df, HeaderF16(h + 2) * as), facc[r][t]);
        }
        if constexpr (C::kMins) {
          const float* ga = a.group_acts + (t0 + t) * (w.k / 32) + b * 8;
          for (int i = 0; i < kMinVecs; ++i) facc[r][t] = hn::NegMulAdd(mins[i], hn::LoadU(df, ga + i * kFloatLanes), facc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const int64_t row = r0 + r * stride;
    for (int t = 0; t < T; ++t) y[(t0 + t) * ldy + row] = hn::GetLane(hn::SumOfLanes(df, facc[r][t]));
  }
}

// BlockTile as a call of its own (the body inlines into decode's row loop).
template <CodeKind K, int R, int T, bool kFar = false, bool kDot = false>
HWY_NOINLINE void BlockTile(const QuantWeights& w, const BlockActs& a, const int8_t* panel, int64_t r0, int t0,
                            float* y, int64_t ldy, int64_t stride = 1) {
  BlockTileBody<K, R, T, kFar, kDot>(w, a, panel, r0, t0, y, ldy, stride);
}

#include "kernels/cpu/block32_tile-inl.h"  // Block32Tile: the 32-weight block kinds (q8_0, q4_0, ..., iq4_nl)

// One tile of a block kind.
template <CodeKind K, int R, int T, bool kFar = false, bool kDot = false>
HWY_INLINE void AnyBlockTile(const QuantWeights& w, const BlockActs& a, const int8_t* panel, int64_t r0, int t0, float* y,
                             int64_t ldy, int64_t stride = 1) {
  if constexpr (kBlock32<K>) {
    Block32Tile<K, R, T, kFar, kDot>(w, a, panel, r0, t0, y, ldy, stride);
  } else {
    BlockTile<K, R, T, kFar, kDot>(w, a, panel, r0, t0, y, ldy, stride);
  }
}

// Decode's two far streams of a block kind, rows [r0, r0 + half) and
// [r0 + half, r0 + 2 half), a row of each at a time as AnyBlockTile<K, 2, 1,
// true> reads them, in one call: its setup and constants once, not once a
// row (decode on the targets without Block32Decode512: AVX2, NEON).
template <CodeKind K, bool kDot>
HWY_NOINLINE void BlockDecodeFar(const QuantWeights& w, const BlockActs& a, const int8_t* panel, int64_t r0, int64_t half,
                                 float* y, int64_t ldy) {
  for (int64_t r = r0; r < r0 + half; ++r) {
    if constexpr (kBlock32<K>) {
      Block32TileBody<K, 2, 1, true, kDot>(w, a, panel, r, 0, y, ldy, half);
    } else {
      BlockTileBody<K, 2, 1, true, kDot>(w, a, panel, r, 0, y, ldy, half);
    }
  }
}

#include "kernels/cpu/rows16_tile-inl.h"  // Rows16Prepare, Rows16Dot: q4_0 / q4_K / q6_K batches on AVX-512 VNNI
#include "kernels/cpu/block32_decode_tile-inl.h"  // Block32Decode512: the block kinds' decode on AVX-512 VNNI (all but q8_0)
#include "kernels/cpu/block_acts-inl.h"  // GroupActs, StepOffsets, SubSums: the per-token tables

// Tokens [t_begin, t_end) of a batch against rows [row_begin, row_end):
// tokens in chunks kept in L2, tiles of 8 (the weight-order kinds, q80
// and i8, one float accumulator a token; and on x86 the super-block
// kinds), 4, 2 and 1 tokens over blocks of rows kept in L2. A super-block
// kind's tile keeps an int32 and a float sum a token: with eight tokens
// AVX2 keeps part of them on the stack, but its step inflates a row's
// codes and scales once for eight tokens instead of four, and for q6k,
// q3k and iq4xs (whose inflation is most of a step of four) that won:
// `BM_QuantMatmul/kind:*/M:64/K:2048`, best of 25 alternated, Zen 3 AVX2:
// q6k 1.18x, q3k 1.14x, iq4xs 1.11x, q5k and q2k 1.05x, q4k 1.01x; Zen 5
// AVX3_VNNI (32 registers, no spills; q4k and q6k batches take Rows16
// there): q3k 1.17x, q2k 1.09x, q5k 1.09x, iq4xs 1.01x. The 32-weight
// kinds keep four (eight: q4_0 0.97x on AVX2 - a token's work there is
// mostly its own scale products, not the row's inflation; on AVX3_VNNI
// q4_1 0.86x, q5_1 0.96x). `q`: every token's codes.
template <CodeKind K, bool kDot>
void BlockBatch(const QuantWeights& w, const BlockActs& acts, const int8_t* q, int64_t k, float* y, int64_t ldy,
                int64_t row_begin, int64_t row_end, int t_begin, int t_end) {
  constexpr bool kNibbleOrder = K != CodeKind::kQ80 && K != CodeKind::kI8;  // the weight-order kinds
  constexpr bool kEights = !kNibbleOrder || (ORK_X86_256 && !kBlock32<K>);
  thread_local std::vector<int8_t> scratch;
  const int chunk = static_cast<int>(std::clamp<int64_t>((int64_t{256} << 10) / k / 4 * 4, 4, 256));
  const int64_t row_bytes = plane0_row_bytes(K, w.k) + plane1_row_bytes(K, w.k);
  const int64_t row_block = std::max<int64_t>(4, (int64_t{128} << 10) / row_bytes);
  int8_t* const panels = PanelScratch(scratch, std::min(chunk, t_end - t_begin) * k);
  for (int c0 = t_begin; c0 < t_end; c0 += chunk) {
    const int c1 = std::min(t_end, c0 + chunk);
    const int t8 = kEights ? c0 + (c1 - c0) / 8 * 8 : c0;
    const int t4 = t8 + (c1 - t8) / 4 * 4, t2 = t4 + (c1 - t4) / 2 * 2;
    auto tile_size = [&](int t) { return t < t8 ? 8 : t < t4 ? 4 : t < t2 ? 2 : 1; };
    for (int t = c0; t < c1; t += tile_size(t)) {
      PanelActs<kNibbleOrder>(q + t * k, tile_size(t), k, panels + (t - c0) * k);
    }
    for (int64_t rb = row_begin; rb < row_end; rb += row_block) {
      const int64_t re = std::min(row_end, rb + row_block);
      for (int t = c0; t < c1; t += tile_size(t)) {
        const int8_t* panel = panels + (t - c0) * k;
        switch (tile_size(t)) {
          case 8:
            if constexpr (kEights) {
              for (int64_t r = rb; r < re; ++r) AnyBlockTile<K, 1, 8, false, kDot>(w, acts, panel, r, t, y, ldy);
            }
            break;
          case 4:
            for (int64_t r = rb; r < re; ++r) AnyBlockTile<K, 1, 4, false, kDot>(w, acts, panel, r, t, y, ldy);
            break;
          case 2:
            for (int64_t r = rb; r < re; ++r) AnyBlockTile<K, 1, 2, false, kDot>(w, acts, panel, r, t, y, ldy);
            break;
          default:
            for (int64_t r = rb; r < re; ++r) AnyBlockTile<K, 1, 1, false, kDot>(w, acts, panel, r, t, y, ldy);
        }
      }
    }
  }
}

#if ORK_X86_DOT
// A batch of four tokens or more of a kind Rows16Dot serves: tokens in
// chunks kept in L2; within a chunk, each sixteen rows prepared once
// (transposed: Rows16Prepare) and met by its tiles of 8, then 4 tokens,
// while the next sixteen rows come in; a chunk of only four tokens (four
// streams' decode step) skips the stored transposition and reads q4_0 and
// q4_K codes from the rows. The rows after the last sixteen and the last
// n % 4 tokens take BlockBatch.
template <CodeKind K, bool kDot>
void MatmulRows16(const QuantWeights& w, const BlockActs& acts, const int8_t* q, int n, float* y, int64_t ldy,
                  int64_t row_begin, int64_t row_end) {
  const int64_t k = w.k;
  const int64_t row16_end = row_begin + (row_end - row_begin) / 16 * 16;
  const int n4 = n / 4 * 4;
  const int chunk = static_cast<int>(std::clamp<int64_t>((int64_t{256} << 10) / k / 8 * 8, 8, 256));
  const int64_t b0 = plane0_row_bytes(K, k), b1 = plane1_row_bytes(K, k);
  thread_local Rows16 prepared;
  for (int c0 = 0; c0 < n4; c0 += chunk) {
    const int c1 = std::min(n4, c0 + chunk), t8 = c0 + (c1 - c0) / 8 * 8;
    for (int64_t r = row_begin; r < row16_end; r += 16) {
      // One tile of four alone in the chunk (four streams' decode step):
      // the codes straight from the rows, never stored.
      const bool alone = kRows16Nibbles<K> && c1 - c0 == 4;
      Rows16Prepare<K>(w, r, prepared, !alone);
      Rows16Next next;  // for the first tile only (two blocks ahead measured slower)
      if (r + 16 < row16_end) {
        next.span[0] = w.p0 + (r + 16) * b0;
        next.span[1] = w.p1 + (r + 16) * b1;
        next.bytes[0] = 16 * b0;
        next.bytes[1] = 16 * b1;
      }
      int t = c0;
      for (; t < t8; t += 8) Rows16Dot<K, 8>(prepared, acts, q, k, r, t, y, ldy, t == c0 ? next : Rows16Next{});
      if (t < c1) {
        Rows16Dot<K, 4>(prepared, acts, q, k, r, t, y, ldy, t == c0 ? next : Rows16Next{}, alone ? w.p0 + r * b0 : nullptr,
                        b0);
      }
    }
  }
  if (row16_end < row_end) BlockBatch<K, kDot>(w, acts, q, k, y, ldy, row16_end, row_end, 0, n);
  if (n4 < n) BlockBatch<K, kDot>(w, acts, q, k, y, ldy, row_begin, row16_end, n4, n);
}
#endif

// As MatmulKind and MatmulPrefill: decode reads two far streams per
// thread; batches go to MatmulRows16 (q4_0, q4_K, q6_K on AVX-512 VNNI) or
// BlockBatch. Also i8 given its activations' floats (kBlock32).
template <CodeKind K, bool kDot = false>
void MatmulBlockKind(const QuantWeights& w, const QuantActs& in, float* y, int64_t ldy, int64_t row_begin,
                     int64_t row_end) {
  constexpr bool kNibbleOrder = K != CodeKind::kQ80 && K != CodeKind::kI8;  // the weight-order kinds
  constexpr bool kMins = K == CodeKind::kQ4k || K == CodeKind::kQ5k || K == CodeKind::kQ41 || K == CodeKind::kQ51;
  thread_local std::vector<int8_t> scratch, codes;
  thread_local std::vector<float> group_acts;
  thread_local std::vector<int16_t> sub_sums;
  thread_local std::vector<int32_t> block_sums;
  thread_local std::vector<float> scales;
  const int64_t block = act_block(K), nb = in.k / block;
  scales.resize(static_cast<size_t>(in.n * nb));
  const int8_t* q = in.q;
  if (in.f32 != nullptr) {
    codes.resize(static_cast<size_t>(in.n * in.k));
    block_sums.resize(scales.size());
    QuantizeActs(in.f32, static_cast<int>(in.n * nb), block, codes.data(), scales.data(), block_sums.data());
    q = codes.data();
  } else {
    for (int t = 0; t < in.n; ++t) std::fill_n(&scales[static_cast<size_t>(t * nb)], nb, in.scale[t]);
  }
#if ORK_X86_DOT
  // Decode of the kinds kBlock32Decode512 names, on AVX-512 VNNI: two far streams a thread,
  // four groups a step (Block32Decode512); none of the per-step tables below.
  if constexpr (kDot && kBlock32Decode512<K>) {
    if (in.n == 1) {
      thread_local Decode512Acts wide;
      Decode512Prepare<K>(q, scales.data(), block, in.k, wide);
      const int64_t half = (row_end - row_begin) / 2;
      Block32Decode512<K, 2>(w, wide, row_begin, half, half, y);
      if ((row_end - row_begin) % 2 == 1) Block32Decode512<K, 1>(w, wide, row_end - 1, 1, 1, y);
      return;
    }
  }
#endif
  if constexpr (kMins) GroupActs(q, scales.data(), in.n, in.k, block, group_acts);
  if constexpr (BlockCodes<K>::kOffsetSums || BlockCodes<K>::kSubMins) SubSums(q, in.n, in.k, sub_sums);
  BlockActs acts{scales.data(), group_acts.data(), sub_sums.data(), nb};
  thread_local std::vector<float> step_scales;
  if constexpr (kBlock32<K> && !Block32Codes<K>::kWeightOrder && kStepGroups == 2) {
    // Always for the kinds that add in int16 (their tile reads them even for
    // one token); for iq4nl where a batch shares them.
    if ((in.n > 1 || Block32Codes<K>::kAdd16) && block == 32) {
      // [token][step][lane]: group 2 st in the low half, 2 st + 1 in the high.
      const hn::Repartition<float, DI32> df;  // the tile's lanes (not the widest: AVX-512 has 16)
      const size_t lanes = hn::Lanes(df), steps = static_cast<size_t>(in.k / 64);
      step_scales.resize(static_cast<size_t>(in.n) * steps * lanes);
      for (size_t t = 0; t < static_cast<size_t>(in.n); ++t) {
        for (size_t st = 0; st < steps; ++st) {
          float* v = &step_scales[(t * steps + st) * lanes];
          const float* sc = &scales[t * static_cast<size_t>(nb) + 2 * st];
          std::fill_n(v, lanes / 2, sc[0]);
          std::fill_n(v + lanes / 2, lanes / 2, sc[1]);
        }
      }
      acts.step_scales = step_scales.data();
    }
  }
  thread_local std::vector<int32_t> step_offsets;
  if constexpr (kBlock32<K> && Block32Codes<K>::kOffsetLater) {
    StepOffsets<Block32Codes<K>::kOffset>(q, in.n, in.k, step_offsets);
    acts.step_offsets = step_offsets.data();
  }
#if ORK_X86_DOT
  // Batches of four tokens or more of the kinds Rows16Dot serves.
  thread_local std::vector<int32_t> group_offsets;
  bool rows16 = false;
  if constexpr (kDot && kRows16<K>) {
    rows16 = in.n >= 4 && (K != CodeKind::kQ40 || block == 32);
    if constexpr (K == CodeKind::kQ40 || K == CodeKind::kI8) {
      if (rows16) {
        GroupOffsets<K == CodeKind::kI8 ? kRows16I8Offset : Block32Codes<K>::kOffset>(q, in.n, in.k, group_offsets);
        acts.group_offsets = group_offsets.data();
      }
    }
  }
#endif
  QuantActs a = in;  // the codes the tiles read
  a.q = q;
  if (a.n == 1) {
    int8_t* const panel = PanelScratch(scratch, a.k);
    PanelActs<kNibbleOrder>(a.q, 1, a.k, panel);
    const int64_t half = (row_end - row_begin) / 2;
    BlockDecodeFar<K, kDot>(w, acts, panel, row_begin, half, y, ldy);
    if ((row_end - row_begin) % 2 == 1) AnyBlockTile<K, 1, 1, false, kDot>(w, acts, panel, row_end - 1, 0, y, ldy);
    return;
  }
#if ORK_X86_DOT
  if constexpr (kDot && kRows16<K>) {
    if (rows16) return MatmulRows16<K, kDot>(w, acts, a.q, a.n, y, ldy, row_begin, row_end);
  }
#endif
  BlockBatch<K, kDot>(w, acts, a.q, a.k, y, ldy, row_begin, row_end, 0, a.n);
}

#endif  // ORK_KERNELS_CPU_BLOCK_MATMUL_INL_H_
