// Decode's tile for the carried block kinds but q8_0 (q4_0, q4_1, q5_0,
// q5_1, iq4_nl, q4_K, q5_K, q6_K, iq4_xs, q3_K, q2_K) on AVX-512 VNNI (the
// AVX3_VNNI target), one SIMD target's worth. Not a header of its own:
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
constexpr bool kBlock32Decode512 = K == CodeKind::kQ40 || K == CodeKind::kIq4nl || K == CodeKind::kQ4k ||
                                   K == CodeKind::kQ5k || K == CodeKind::kQ6k || K == CodeKind::kIq4xs ||
                                   K == CodeKind::kQ3k || K == CodeKind::kQ2k || K == CodeKind::kQ41 ||
                                   K == CodeKind::kQ50 || K == CodeKind::kQ51;

// q4_0's codes are unsigned as stored (less 8); iq4_nl's table levels plus
// 128 (1 .. 241) make its codes unsigned too. Either way each group's sum
// starts from minus the offset times its activations. q4_K's codes are
// unsigned with no offset: its mins come off as dmin * m times each
// group's activation sum. q6_K's six-bit codes are unsigned less 32, with a
// sub-scale per sixteen: the low and the high nibbles' sums (one
// sub-block each) keep their offsets apart. iq4_xs is iq4_nl's codebook
// under a signed sub-scale per group: each group's sum (offset included)
// times its sub-scale. q3_K is q6_K's arrangement with three-bit codes
// less 4; q2_K's two-bit codes have no offset but a min per sixteen.
template <CodeKind K>
constexpr int kDecode512Offset = K == CodeKind::kQ40                               ? 8
                                 : K == CodeKind::kIq4nl || K == CodeKind::kIq4xs ? 128
                                 : K == CodeKind::kQ6k                             ? 32
                                 : K == CodeKind::kQ3k                             ? 4
                                 : K == CodeKind::kQ50                             ? 16
                                                                                   : 0;
alignas(16) constexpr uint8_t kIq4nlTableU8[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
static_assert(kIq4nlTableU8[0] == kIq4nlTable[0] + 128 && kIq4nlTableU8[15] == kIq4nlTable[15] + 128,
              "the levels plus 128");
// Each of four bytes four times, from byte 0 and from byte 4: a half
// super-block's four sub-scales of q4_K (q5_K), one per group, for the
// group's four lanes.
alignas(16) constexpr uint8_t kSpreadBytes[2][16] = {{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
                                                     {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7}};

// One token's activations as the tile reads them, per step of four groups:
// 64 bytes of the groups' first sixteen activations (the low nibbles'),
// then 64 of their last sixteen. q4_0, q5_0 and iq4_nl: sixteen int32
// offsets (minus the offset times the activations under each lane; q4_1
// and q5_1: the activations' sum under each lane, for the mins) and
// sixteen floats, each group's activation scale in its four lanes. q4_K and
// q5_K: each super-block's activation scale, and each group's activation
// sum times it (its mins' share, kept where the offsets would be). q6_K:
// the low and the high nibbles' offsets apart, and the super-blocks'
// scales. iq4_xs: iq4_nl's offsets and the super-blocks' scales. Groups
// past the row's end are zeros.
struct Decode512Acts {
  std::vector<uint8_t> bytes;  // storage, with room to align it
  const int8_t* panel = nullptr;
  const int32_t* offsets = nullptr;
  const int32_t* offsets_hi = nullptr;  // q6_K: the high nibbles' ([step][16]); `offsets` the low ones'
  const float* scales = nullptr;        // q4_0, iq4_nl: [step][16]; q4_K, q5_K, q6_K, iq4_xs: [super-block]
  const float* group_sums = nullptr;    // q4_K, q5_K: [group]
};

// q: the token's k codes; scales: one per activation block of `block`
// codes (32, or the K-quants' 256).
template <CodeKind K>
HWY_NOINLINE void Decode512Prepare(const int8_t* q, const float* scales, int64_t block, int64_t k,
                                   Decode512Acts& out) {
  const int64_t groups = k / 32, steps = (groups + 3) / 4;
  const size_t panel_bytes = static_cast<size_t>(steps * 128), side_bytes = static_cast<size_t>(steps * 64);
  out.bytes.resize(panel_bytes + 3 * side_bytes + 64);
  const auto at = reinterpret_cast<uintptr_t>(out.bytes.data());
  uint8_t* base = out.bytes.data() + ((64 - at % 64) % 64);
  auto* panel = reinterpret_cast<int8_t*>(base);
  auto* offsets = reinterpret_cast<int32_t*>(base + panel_bytes);
  auto* spread = reinterpret_cast<float*>(base + panel_bytes + side_bytes);
  auto* offsets_hi = reinterpret_cast<int32_t*>(base + panel_bytes + 2 * side_bytes);
  std::memset(base, 0, panel_bytes + 3 * side_bytes);
  for (int64_t g = 0; g < groups; ++g) {
    int8_t* p = panel + (g / 4) * 128 + (g % 4) * 16;
    std::memcpy(p, q + g * 32, 16);
    std::memcpy(p + 64, q + g * 32 + 16, 16);
    if constexpr (kBlock32<K>) std::fill_n(spread + g * 4, 4, scales[g]);
  }
  // The activations under each lane (the dot's lanes: four of the low
  // nibbles' and four of the high ones').
  const __m512i one = _mm512_set1_epi8(1);
  for (int64_t st = 0; st < steps; ++st) {
    if constexpr (K == CodeKind::kQ2k) {
      // Each sixteen's activation sum times its super-block's scale, in
      // place of the offsets: sixteen g's first sixteen (sub-block 2g of
      // the row) and its last (2g + 1).
      auto* sums = reinterpret_cast<float*>(offsets);
      for (int half = 0; half < 2; ++half) {
        __m512i sum = DotAddUnsigned512(_mm512_setzero_si512(), one, _mm512_load_si512(panel + st * 128 + 64 * half));
        sum = _mm512_add_epi32(sum, _mm512_shuffle_epi32(sum, _MM_PERM_CDAB));
        sum = _mm512_add_epi32(sum, _mm512_shuffle_epi32(sum, _MM_PERM_BADC));
        alignas(64) int32_t lanes[16];
        _mm512_store_si512(lanes, sum);
        for (int64_t j = 0, g = st * 4; j < 4 && g < groups; ++j, ++g) {
          sums[2 * g + half] = scales[g * 32 / block] * static_cast<float>(lanes[4 * j]);
        }
      }
      continue;
    }
    if constexpr (K == CodeKind::kQ6k || K == CodeKind::kQ3k) {
      const __m512i neg = _mm512_set1_epi32(-kDecode512Offset<K>);
      const __m512i lo = DotAddUnsigned512(_mm512_setzero_si512(), one, _mm512_load_si512(panel + st * 128));
      const __m512i hi = DotAddUnsigned512(_mm512_setzero_si512(), one, _mm512_load_si512(panel + st * 128 + 64));
      _mm512_store_si512(offsets + st * 16, _mm512_mullo_epi32(lo, neg));
      _mm512_store_si512(offsets_hi + st * 16, _mm512_mullo_epi32(hi, neg));
      continue;
    }
    __m512i sum = _mm512_setzero_si512();
    sum = DotAddUnsigned512(sum, one, _mm512_load_si512(panel + st * 128));
    sum = DotAddUnsigned512(sum, one, _mm512_load_si512(panel + st * 128 + 64));
    if constexpr (K == CodeKind::kQ4k || K == CodeKind::kQ5k) {  // group sums, in lanes 0, 4, 8, 12; in place of the offsets
      sum = _mm512_add_epi32(sum, _mm512_shuffle_epi32(sum, _MM_PERM_CDAB));
      sum = _mm512_add_epi32(sum, _mm512_shuffle_epi32(sum, _MM_PERM_BADC));
      alignas(64) int32_t lanes[16];
      _mm512_store_si512(lanes, sum);
      auto* sums = reinterpret_cast<float*>(offsets);
      for (int j = 0; j < 4; ++j) sums[st * 4 + j] = scales[(st * 4 + j) * 32 / block] * static_cast<float>(lanes[4 * j]);
    } else if constexpr (K == CodeKind::kQ41 || K == CodeKind::kQ51) {  // the sums themselves, for the mins
      _mm512_store_si512(offsets + st * 16, sum);
    } else {
      _mm512_store_si512(offsets + st * 16, _mm512_mullo_epi32(sum, _mm512_set1_epi32(-kDecode512Offset<K>)));
    }
  }
  out.panel = panel;
  out.offsets = offsets;
  out.offsets_hi = offsets_hi;
  out.scales = kBlock32<K> ? spread : scales;
  out.group_sums = reinterpret_cast<const float*>(offsets);
}

// q5_K's fifth bit of a step's weights, or q3_K's third (their bit plane:
// weight w of a group in byte w / 8 at bit w % 8; a group's 4 bytes): the
// step's 16 plane bytes in every 128-bit block, kPlaneBitByte picks the byte
// under each code lane of block b (low nibbles' weights 0-15 from bytes 4b
// and 4b + 1, high nibbles' 16-31 from 4b + 2 and 4b + 3); `value` (the
// bit's weight: 16 or 4) is added where the lane's bit is set.
struct PlaneBitBytes {
  uint8_t idx[2][64];
  constexpr PlaneBitBytes() : idx{} {
    for (int half = 0; half < 2; ++half) {
      for (int p = 0; p < 64; ++p) idx[half][p] = static_cast<uint8_t>(4 * (p / 16) + 2 * half + (p % 16) / 8);
    }
  }
};
alignas(64) constexpr PlaneBitBytes kPlaneBitByte{};
HWY_INLINE __m512i AddPlaneBit512(__m512i codes, __m512i planes, int half, char value) {
  const __m512i bytes = _mm512_shuffle_epi8(planes, _mm512_load_si512(kPlaneBitByte.idx[half]));
  const __m512i bit = _mm512_set1_epi64(static_cast<int64_t>(0x8040201008040201ull));
  return _mm512_mask_add_epi8(codes, _mm512_test_epi8_mask(bytes, bit), codes, _mm512_set1_epi8(value));
}

// q4_K's and q5_K's super-blocks of R rows: each group's sum in int32
// lanes as q4_0's (no offset), times its six-bit sub-scale in int32 (at
// most 63 * 2 * 8 * 31 * 127 a lane over the super-block's two steps), to
// float once, times d and the activation scale; the mins as dmin * m
// times the group's scaled activation sum, eight groups in a 256-bit
// vector. q5_K's fifth bit as AddPlaneBit512 adds it.
template <CodeKind K, int R>
HWY_INLINE void Q4kDecode512(const BlockRows<K, R>& rows, const Decode512Acts& a, int64_t superblocks, float* out) {
  static_assert(kQ4kHeaderBytes == 20, "d, dmin, 8 scales, 8 mins");
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m128i pick0 = _mm_load_si128(reinterpret_cast<const __m128i*>(kSpreadBytes[0]));
  const __m128i pick1 = _mm_load_si128(reinterpret_cast<const __m128i*>(kSpreadBytes[1]));
  __m512 facc[R];
  __m256 macc[R];
  for (int r = 0; r < R; ++r) {
    facc[r] = _mm512_setzero_ps();
    macc[r] = _mm256_setzero_ps();
  }
  // Step st of row r.
  auto dot = [&](int r, int64_t st, const int8_t* p) HWY_ATTR {
    const __m512i b = _mm512_loadu_si512(rows.row0[r] + st * 64);
    __m512i lo = _mm512_and_si512(b, low), hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low);
    if constexpr (K == CodeKind::kQ5k) {
      const __m512i planes = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows.row1[r] + st * 16)));
      lo = AddPlaneBit512(lo, planes, 0, 0x10);
      hi = AddPlaneBit512(hi, planes, 1, 0x10);
    }
    return DotAddUnsigned512(DotAddUnsigned512(_mm512_setzero_si512(), lo, _mm512_load_si512(p)), hi,
                             _mm512_load_si512(p + 64));
  };
  for (int64_t sb = 0; sb < superblocks; ++sb) {
    for (int r = 0; r < R; ++r) {
      DecodeStreamPrefetch<128>(rows.row0[r], sb, kDecodeNearBytes / R, kDecodeWindowBytes / R);
      if constexpr (K == CodeKind::kQ5k) {  // its bit plane, a quarter of the codes' bytes
        DecodeStreamPrefetch<32>(rows.row1[r], sb, kDecodeNearBytes / R / 4, kDecodeWindowBytes / R / 4);
      }
      if ((sb * kQ4kHeaderBytes) % 64 < kQ4kHeaderBytes) hwy::Prefetch(rows.headers[r] + rows.b1 + sb * kQ4kHeaderBytes);
    }
    const int8_t* p = a.panel + sb * 256;
    const __m256 sums = _mm256_load_ps(a.group_sums + sb * 8);
    const __m128 s = _mm_set_ss(a.scales[sb]);
    for (int r = 0; r < R; ++r) {
      const uint8_t* head = rows.headers[r] + sb * kQ4kHeaderBytes;
      const __m128i sc = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(head + 4));
      const __m512i isum =
          _mm512_add_epi32(_mm512_mullo_epi32(dot(r, 2 * sb, p), _mm512_cvtepu8_epi32(_mm_shuffle_epi8(sc, pick0))),
                           _mm512_mullo_epi32(dot(r, 2 * sb + 1, p + 128),
                                              _mm512_cvtepu8_epi32(_mm_shuffle_epi8(sc, pick1))));
      int32_t d_dmin;
      std::memcpy(&d_dmin, head, 4);
      const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(d_dmin));  // d, dmin
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_broadcastss_ps(_mm_mul_ss(dm, s)), facc[r]);
      const __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(head + 12))));
      macc[r] = _mm256_fnmadd_ps(_mm256_mul_ps(m, _mm256_broadcastss_ps(_mm_movehdup_ps(dm))), sums, macc[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m256 both = _mm256_add_ps(macc[r], _mm256_add_ps(_mm512_castps512_ps256(facc[r]),
                                                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(facc[r]), 1))));
    const __m128 four = _mm_add_ps(_mm256_castps256_ps128(both), _mm256_extractf128_ps(both, 1));
    const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
    out[r] = _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
  }
}

// q6_K's high two bits of a step's weights (its 2-bit plane: weight w of a
// group in byte w / 4 at bit 2 (w % 4); a group's 8 bytes): each 128-bit
// block b of `planes` holds group b's eight bytes; kQ6kBitByte picks the
// byte under each code lane (low nibbles' weights 0-15 from bytes 0-3,
// high nibbles' 16-31 from 4-7); bit0 and bit1 are the lane's two bits.
alignas(16) constexpr uint8_t kQ6kBitByte[2][16] = {{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
                                                    {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7}};
HWY_INLINE __m512i AddQ6kHighBits(__m512i nibbles, __m512i planes, int half) {
  const __m512i pick = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kQ6kBitByte[half])));
  const __m512i bit0 = _mm512_set1_epi32(0x40100401), bit1 = _mm512_set1_epi32(static_cast<int>(0x80200802u));
  const __m512i bytes = _mm512_shuffle_epi8(planes, pick);
  nibbles = _mm512_mask_add_epi8(nibbles, _mm512_test_epi8_mask(bytes, bit0), nibbles, _mm512_set1_epi8(0x10));
  return _mm512_mask_add_epi8(nibbles, _mm512_test_epi8_mask(bytes, bit1), nibbles, _mm512_set1_epi8(0x20));
}

// The loop of q6_K's, q3_K's and iq4_xs's super-blocks over R rows: each
// row's codes, high bits (q6_K, q3_K) and headers prefetched as its
// stream goes on;
// `isum(r, sb, head)` gives row r's int32 lane sums for super-block sb
// (sub-scales applied), to float once and times d and the activation
// scale.
template <CodeKind K, int R, class ISum>
HWY_INLINE void SuperBlocksDecode512(const BlockRows<K, R>& rows, const Decode512Acts& a, int64_t superblocks,
                                     float* out, const ISum& isum) {
  constexpr int64_t kHeader = BlockCodes<K>::kHeader;
  // Plane bytes a super-block: q6_K 128 and 64, q3_K 64 and 32 (plane 1
  // half of plane 0 either way: prefetched half as far ahead), iq4_xs 128 and
  // none, q2_K 64 and none.
  constexpr bool kTwoBit = K == CodeKind::kQ3k || K == CodeKind::kQ2k;
  constexpr int64_t kBytes0 = kTwoBit ? 64 : 128;
  constexpr int64_t kBytes1 = K == CodeKind::kQ6k || K == CodeKind::kQ3k ? kBytes0 / 2 : 0;
  __m512 facc[R], macc[R];  // macc: q2_K's mins
  for (int r = 0; r < R; ++r) facc[r] = macc[r] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < superblocks; ++sb) {
    for (int r = 0; r < R; ++r) {
      DecodeStreamPrefetch<kBytes0>(rows.row0[r], sb, kDecodeNearBytes / R, kDecodeWindowBytes / R);
      if constexpr (kBytes1 > 0) {
        DecodeStreamPrefetch<kBytes1>(rows.row1[r], sb, kDecodeNearBytes / R / 2, kDecodeWindowBytes / R / 2);
      }
      if ((sb * kHeader) % 64 < kHeader) hwy::Prefetch(rows.headers[r] + rows.b1 + sb * kHeader);
    }
    const __m128 s = _mm_set_ss(a.scales[sb]);
    for (int r = 0; r < R; ++r) {
      const uint8_t* head = rows.headers[r] + sb * kHeader;
      const __m512i sum = isum(r, sb, head);
      const __m128 d = _mm_set_ss(HeaderF16(head));
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_broadcastss_ps(_mm_mul_ss(d, s)), facc[r]);
      if constexpr (K == CodeKind::kQ2k) {  // dmin * m against each sixteen's scaled activation sum
        const __m128i m = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(head + 4)), 4),
                                        _mm_set1_epi8(0x0F));
        const __m512 dm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m)), _mm512_set1_ps(HeaderF16(head + 2)));
        macc[r] = _mm512_fnmadd_ps(dm, _mm512_load_ps(a.group_sums + sb * 16), macc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(facc[r], macc[r]));
}

// q6_K's and q3_K's super-blocks of R rows: per step, the codes under the
// low and the high nibbles' lanes (six bits, unsigned; q3_K's three) each
// summed from minus 32 (4) times their activations, each times its
// sixteen weights' signed sub-scale in int32 (at most 63 * 4 * 127 + 32 *
// 4 * 128 before, times 128: 6.2 million a lane, four products a
// super-block). q3_K's low two bits: a step's 32 bytes of its 2-bit plane
// hold groups 0 and 1, then 2 and 3, each pair's byte j at shifts 0, 2
// (weight j of the first, the second) and 4, 6 (weight 16 + j); each
// pair's 16 bytes go to both its groups' blocks and shift there by the
// block's own count. q2_K: those two bits alone, no offset, unsigned
// four-bit sub-scales (its mins in SuperBlocksDecode512).
template <CodeKind K, int R>
HWY_INLINE void Sub16Decode512(const BlockRows<K, R>& rows, const Decode512Acts& a, int64_t superblocks, float* out) {
  static_assert(kQ6kHeaderBytes == 18 && kQ2kHeaderBytes == 20, "d, 16 sub-scales (q3_K's header too); q2_K's d, dmin, 16");
  static_assert(K == CodeKind::kQ6k || K == CodeKind::kQ3k || K == CodeKind::kQ2k, "the kinds of sixteen sub-scales");
  const __m512i low = _mm512_set1_epi8(0x0F), three = _mm512_set1_epi8(3);
  const __m512i dup = _mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0);  // group b's eight plane bytes into block b
  const __m512i pairs = _mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0);  // q3_K: pair b / 2's sixteen bytes into block b
  const __m512i shift_lo = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0, 0, 0x0002000200020002,
                                            0x0002000200020002, 0, 0);
  const __m512i shift_hi = _mm512_add_epi16(shift_lo, _mm512_set1_epi16(4));
  // Sub-scale bytes for each code lane: step h's groups are sub-blocks
  // 8h + 2b (low nibbles) and 8h + 2b + 1 (high).
  alignas(16) static constexpr uint8_t kPick[2][2][16] = {
      {{0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6}, {1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7}},
      {{8, 8, 8, 8, 10, 10, 10, 10, 12, 12, 12, 12, 14, 14, 14, 14}, {9, 9, 9, 9, 11, 11, 11, 11, 13, 13, 13, 13, 15, 15, 15, 15}}};
  SuperBlocksDecode512(rows, a, superblocks, out, [&](int r, int64_t sb, const uint8_t* head) HWY_ATTR {
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(head + (K == CodeKind::kQ2k ? 4 : 2)));
    __m512i isum = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const int64_t st = 2 * sb + h;
      __m512i lo, hi;
      if constexpr (K == CodeKind::kQ6k) {
        const __m512i b = _mm512_loadu_si512(rows.row0[r] + st * 64);
        const __m512i planes = _mm512_permutexvar_epi64(
            dup, _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.row1[r] + st * 32))));
        lo = AddQ6kHighBits(_mm512_and_si512(b, low), planes, 0);
        hi = AddQ6kHighBits(_mm512_and_si512(_mm512_srli_epi16(b, 4), low), planes, 1);
      } else {
        const __m512i v = _mm512_permutexvar_epi64(
            pairs, _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.row0[r] + st * 32))));
        lo = _mm512_and_si512(_mm512_srlv_epi16(v, shift_lo), three);
        hi = _mm512_and_si512(_mm512_srlv_epi16(v, shift_hi), three);
        if constexpr (K == CodeKind::kQ3k) {
          const __m512i planes = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows.row1[r] + st * 16)));
          lo = AddPlaneBit512(lo, planes, 0, 4);
          hi = AddPlaneBit512(hi, planes, 1, 4);
        }
      }
      const __m512i from_lo = K == CodeKind::kQ2k ? _mm512_setzero_si512() : _mm512_load_si512(a.offsets + st * 16);
      const __m512i from_hi = K == CodeKind::kQ2k ? _mm512_setzero_si512() : _mm512_load_si512(a.offsets_hi + st * 16);
      const __m512i dlo = DotAddUnsigned512(from_lo, lo, _mm512_load_si512(a.panel + st * 128));
      const __m512i dhi = DotAddUnsigned512(from_hi, hi, _mm512_load_si512(a.panel + st * 128 + 64));
      // The lanes' sub-scales: signed bytes, or q2_K's low nibbles.
      auto scales_of = [&](int half) HWY_ATTR {
        const __m128i picked = _mm_shuffle_epi8(sc, _mm_load_si128(reinterpret_cast<const __m128i*>(kPick[h][half])));
        if constexpr (K == CodeKind::kQ2k) return _mm512_cvtepu8_epi32(_mm_and_si128(picked, _mm_set1_epi8(0x0F)));
        return _mm512_cvtepi8_epi32(picked);
      };
      const __m512i slo = scales_of(0), shi = scales_of(1);
      if constexpr (K == CodeKind::kQ2k) {
        // A lane's dot fits in int16 (at most 4 * 3 * 127) and its scale's
        // high int16 is zero, so one vpdpwssd makes dot * scale + isum
        // exactly, in place of a vpmulld and an add: in L2 1.04-1.09x
        // (session 49, best of 20). The signed scales would need their
        // high halves cleared first: q3_K 0.98x that way, not taken.
        isum = PairsDotAdd512(PairsDotAdd512(isum, dlo, slo), dhi, shi);
      } else {
        isum = _mm512_add_epi32(isum, _mm512_add_epi32(_mm512_mullo_epi32(dlo, slo), _mm512_mullo_epi32(dhi, shi)));
      }
    }
    return isum;
  });
}

// iq4_xs's super-blocks of R rows: per step, the codes through iq4_nl's
// codebook plus 128 (unsigned, as iq4_nl's tile), each group's sum from
// minus 128 times its activations, times the group's signed sub-scale in
// int32 (at most 8 * 128 * 127 * 32 a lane, two products a super-block).
template <int R>
HWY_INLINE void Iq4xsDecode512(const BlockRows<CodeKind::kIq4xs, R>& rows, const Decode512Acts& a,
                               int64_t superblocks, float* out) {
  static_assert(kIq4xsHeaderBytes == 10, "d, 8 sub-scales");
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4nlTableU8)));
  const __m128i pick[2] = {_mm_load_si128(reinterpret_cast<const __m128i*>(kSpreadBytes[0])),
                           _mm_load_si128(reinterpret_cast<const __m128i*>(kSpreadBytes[1]))};
  SuperBlocksDecode512(rows, a, superblocks, out, [&](int r, int64_t sb, const uint8_t* head) HWY_ATTR {
    const __m128i sc = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(head + 2));
    __m512i isum = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const int64_t st = 2 * sb + h;
      const __m512i b = _mm512_loadu_si512(rows.row0[r] + st * 64);
      const __m512i lo = _mm512_shuffle_epi8(table, _mm512_and_si512(b, low));
      const __m512i hi = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(b, 4), low));
      const __m512i dot = DotAddUnsigned512(
          DotAddUnsigned512(_mm512_load_si512(a.offsets + st * 16), lo, _mm512_load_si512(a.panel + st * 128)), hi,
          _mm512_load_si512(a.panel + st * 128 + 64));
      isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dot, _mm512_cvtepi8_epi32(_mm_shuffle_epi8(sc, pick[h]))));
    }
    return isum;
  });
}

// y for rows r0 + r * stride, r < R: R far streams, each going on with its
// next row in the next iteration of Block32Decode512 (decode's two streams a
// thread, as Tile's and Block32Tile's kFar), each prefetching its codes
// as DecodeStreamPrefetch does and its scales a row ahead.
template <CodeKind K, int R>
HWY_INLINE void Block32Decode512Rows(const QuantWeights& w, const Decode512Acts& a, int64_t r0, int64_t stride,
                                     float* y) {
  static_assert(kBlock32Decode512<K>, "a kind the tile serves");
  const BlockRows<K, R> rows(w, r0, stride);
  const int64_t groups = w.k / 32, full = groups / 4;
  if constexpr (K == CodeKind::kQ4k || K == CodeKind::kQ5k || K == CodeKind::kQ6k || K == CodeKind::kIq4xs ||
                K == CodeKind::kQ3k || K == CodeKind::kQ2k) {
    float out[R];
    if constexpr (K == CodeKind::kQ6k || K == CodeKind::kQ3k || K == CodeKind::kQ2k) {
      Sub16Decode512<K, R>(rows, a, w.k / kSuperBlock, out);
    } else if constexpr (K == CodeKind::kIq4xs) {
      Iq4xsDecode512<R>(rows, a, w.k / kSuperBlock, out);
    } else {
      Q4kDecode512<K, R>(rows, a, w.k / kSuperBlock, out);
    }
    for (int r = 0; r < R; ++r) y[r0 + r * stride] = out[r];
    return;
  } else {
    // q4_1 and q5_1: d and m per group (a row's headers adjacent); the
    // others d alone. q5_0 and q5_1: a fifth bit from the bit plane.
    constexpr bool kMin = K == CodeKind::kQ41 || K == CodeKind::kQ51;
    constexpr bool kBit = K == CodeKind::kQ50 || K == CodeKind::kQ51;
    constexpr int64_t kHeader = Block32Codes<K>::kHeader;
    static_assert(kHeader == (kMin ? 4 : 2), "f16 d (and m) per group");
    const __m512i low = _mm512_set1_epi8(0x0F);
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4nlTableU8)));
    // Each group's d (and m) into its block's four lanes: from halves 0-3,
    // or from d, m interleaved (halves 0, 2, 4, 6 and 1, 3, 5, 7).
    const __m512i spread = kMin ? _mm512_set_epi32(6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0)
                                : _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m512i spread_m = _mm512_add_epi32(spread, _mm512_set1_epi32(1));
    __m512 facc[R];
    for (int r = 0; r < R; ++r) facc[r] = _mm512_setzero_ps();
    // One step; `left` < 4: the row's last groups, read under a mask (the
    // panel, offsets and scales hold zeros past them, and so do the masked
    // codes and scales: no NaN from bytes past the row).
    auto step = [&](int64_t st, int left) HWY_ATTR {
      for (int r = 0; r < R; ++r) {
        DecodeStreamPrefetch<64>(rows.row0[r], st, kDecodeNearBytes / R, kDecodeWindowBytes / R);
        if ((st * 4 * kHeader) % 64 < 4 * kHeader) hwy::Prefetch(rows.headers[r] + rows.b1 + st * 4 * kHeader);
        if constexpr (kBit) {
          DecodeStreamPrefetch<16>(rows.row1[r], st, kDecodeNearBytes / R / 4, kDecodeWindowBytes / R / 4);
        }
      }
      const __m512i alo = _mm512_load_si512(a.panel + st * 128), ahi = _mm512_load_si512(a.panel + st * 128 + 64);
      // q4_1, q5_1: the activations under each lane (for the mins); the
      // others: the offset's share.
      const __m512i off = _mm512_load_si512(a.offsets + st * 16);
      const __m512 as = _mm512_load_ps(a.scales + st * 16);
      for (int r = 0; r < R; ++r) {
        const uint8_t* codes = rows.row0[r] + st * 64;
        const uint8_t* heads = rows.headers[r] + st * 4 * kHeader;
        __m512i b;
        __m128i h;
        if (left == 4) {
          b = _mm512_loadu_si512(codes);
          h = kMin ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(heads))
                   : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(heads));
        } else {
          b = _mm512_maskz_loadu_epi8((uint64_t{1} << (16 * left)) - 1, codes);
          h = _mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << (left * kHeader / 2)) - 1), heads);
        }
        __m512i lo = _mm512_and_si512(b, low), hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), low);
        if constexpr (K == CodeKind::kIq4nl) {
          lo = _mm512_shuffle_epi8(table, lo);
          hi = _mm512_shuffle_epi8(table, hi);
        }
        if constexpr (kBit) {
          const uint8_t* bits = rows.row1[r] + st * 16;
          const __m128i v = left == 4 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(bits))
                                      : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << (4 * left)) - 1), bits);
          const __m512i planes = _mm512_broadcast_i32x4(v);
          lo = AddPlaneBit512(lo, planes, 0, 0x10);
          hi = AddPlaneBit512(hi, planes, 1, 0x10);
        }
        const __m512i dot = DotAddUnsigned512(DotAddUnsigned512(kMin ? _mm512_setzero_si512() : off, lo, alo), hi, ahi);
        const __m512 halves = _mm512_castps256_ps512(_mm256_cvtph_ps(h));
        const __m512 d = _mm512_permutexvar_ps(spread, halves);
        facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(d, as), facc[r]);
        if constexpr (kMin) {
          const __m512 m = _mm512_permutexvar_ps(spread_m, halves);
          facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(off), _mm512_mul_ps(m, as), facc[r]);
        }
      }
    };
    for (int64_t st = 0; st < full; ++st) step(st, 4);
    if (full * 4 < groups) step(full, static_cast<int>(groups - full * 4));
    for (int r = 0; r < R; ++r) y[r0 + r * stride] = _mm512_reduce_add_ps(facc[r]);
  }
}

// Block32Decode512Rows for r0 + i, i < n, in one call: the tables and
// constants set up once, not once a row (a row of K = 512 is two steps):
// BM_QuantMatmulInL2 q4_0 at K = 512 24 -> 28 GB/s, q4_K 24 -> 29 (four
// interleaved rounds, Zen 5).
template <CodeKind K, int R>
HWY_NOINLINE void Block32Decode512(const QuantWeights& w, const Decode512Acts& a, int64_t r0, int64_t n,
                                   int64_t stride, float* y) {
  for (int64_t r = r0; r < r0 + n; ++r) Block32Decode512Rows<K, R>(w, a, r, stride, y);
}
#endif  // ORK_X86_DOT

#endif  // ORK_KERNELS_CPU_BLOCK32_DECODE_TILE_INL_H_
