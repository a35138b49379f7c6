// q4_0 batches on AVX-512 VNNI (the AVX3_VNNI
// target), one SIMD target's worth. Not a header of its own:
// kernels/cpu/block_matmul-inl.h includes it inside its HWY_NAMESPACE once
// per target (Highway's -inl convention), after Block32Tile and its
// activations; it holds code only where ORK_X86_DOT is set (the AVX3
// targets). The toggle guard lets each target's pass include it again.
#if defined(ORK_KERNELS_CPU_ROWS16_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ORK_KERNELS_CPU_ROWS16_TILE_INL_H_
#undef ORK_KERNELS_CPU_ROWS16_TILE_INL_H_
#else
#define ORK_KERNELS_CPU_ROWS16_TILE_INL_H_
#endif

#if ORK_X86_DOT
// The kinds the sixteen-row tile serves: q4_0 (llama.cpp's Q4_0 files) and
// q4_K (most of a Q4_K_M file), whose codes ork keeps alike: 32-weight
// groups of nibbles; q6_K; and i8 with its activations per 32 (a row scale,
// no headers; its signed codes stored plus 128, so unsigned, each
// token-group's sum started from minus 128 times its activations).
// (q5_0, q4_1, q5_1, q8_0, iq4_nl and the other K-quants would take the
// same tile with their own code inflation and scales; they keep
// Block32Tile and BlockTile.)
template <CodeKind K>
constexpr bool kRows16 = K == CodeKind::kQ40 || K == CodeKind::kQ4k || K == CodeKind::kQ6k || K == CodeKind::kI8;
// The kinds whose nibbles a single tile of tokens reads straight from the rows.
template <CodeKind K>
constexpr bool kRows16Nibbles = K == CodeKind::kQ40 || K == CodeKind::kQ4k;
constexpr int kRows16I8Offset = 128;

// Sixteen rows' four dwords at p + r * stride, transposed: out[j] holds
// dword j of rows 0..15 in its lanes 0..15. (Rows as a base and a stride
// keep the sixteen addresses in six registers.)
HWY_INLINE void Transpose16x4(const uint8_t* p, int64_t stride, __m512i out[4]) {
  const int64_t s4 = 4 * stride, s12 = 12 * stride;
  auto lane = [](const uint8_t* at) HWY_ATTR { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at)); };
  __m512i z[4];
  for (int q = 0; q < 4; ++q) {  // 128-bit lane L of z[q]: row q + 4 L
    const uint8_t* row = p + q * stride;
    __m512i v = _mm512_castsi128_si512(lane(row));
    v = _mm512_inserti32x4(v, lane(row + s4), 1);
    v = _mm512_inserti32x4(v, lane(row + 2 * s4), 2);
    z[q] = _mm512_inserti32x4(v, lane(row + s12), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// q4_0's weight scales d of sixteen rows (headers at p + r * stride),
// [group][row] as floats.
void Rows16Scales(const uint8_t* p, int64_t stride, int64_t groups, float* d) {
  static_assert(Block32Codes<CodeKind::kQ40>::kHeader == 2, "one f16 d per group, a row's headers adjacent");
  int64_t g = 0;
  for (; g + 8 <= groups; g += 8) {  // eight groups' d per row: 16 bytes
    __m512i pairs[4];
    Transpose16x4(p + g * 2, stride, pairs);
    for (int j = 0; j < 4; ++j) {
      _mm512_storeu_ps(d + (g + 2 * j) * 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(pairs[j])));
      _mm512_storeu_ps(d + (g + 2 * j + 1) * 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(pairs[j], 16))));
    }
  }
  for (; g < groups; ++g) {
    for (int r = 0; r < 16; ++r) d[g * 16 + r] = HeaderF16(p + r * stride + g * 2);
  }
}

// Sixteen rows of a batch on AVX-512 VNNI, an int32 lane per row, in two
// phases. Rows16Prepare transposes the rows once: each group's 16 x 32
// codes become eight registers' worth, register j holding four
// consecutive codes of each of the sixteen rows (q4_0's bytes as they are,
// 4 x 16 of them, split into low and high nibbles: codes 4j.. and
// 16 + 4j..), and the rows' d become floats, [group][row]. Rows16Dot then
// meets them with each tile of T tokens: a vpdpbusd takes a token's four
// activations broadcast, eight of them sum a whole group for sixteen rows,
// which become floats once and meet the rows' d times the token's scale in
// one multiply-add. (Block32Tile sums four products per lane for one row
// and turns every 64 weights of every row and token into floats.) The same
// integers: q4_0's codes stay unsigned, each token-group's sum started
// from minus eight times its activations (a.group_offsets); the float sums
// are taken group by group, so results agree with the reference to
// rounding, as Block32Tile's do.
struct Rows16 {
  std::vector<uint8_t> bytes;  // the codes' storage, with room to align it
  __m512i* codes = nullptr;    // [group][8], 64-byte aligned
  std::vector<float> d;        // [group][16]: q4_0's d, q4_K's d * sub-scale; q6_K: [sub-block of 16][16]; i8: [16], the row scales
  std::vector<float> m;        // [group][16]: q4_K's dmin * sub-min
};

// q6_K's scales of sixteen rows (headers at p + r * stride: per super-block
// of 256, f16 d, then sixteen signed sub-scales): d * sub-scale per sixteen
// weights, [sub-block][row].
void Rows16Q6kScales(const uint8_t* p, int64_t stride, int64_t groups, float* d) {
  static_assert(kQ6kHeaderBytes == 18, "d, 16 scales");
  for (int64_t b = 0; b < groups / 8; ++b) {
    __m512i head[4], subs[4];
    Transpose16x4(p + b * kQ6kHeaderBytes, stride, head);      // head[0]: d in the low half
    Transpose16x4(p + b * kQ6kHeaderBytes + 2, stride, subs);  // scales 4i .. 4i + 3 in subs[i]
    const __m512 db = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head[0]));
    for (int s = 0; s < 16; ++s) {
      const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(subs[s / 4], 24 - 8 * (s % 4)), 24);
      _mm512_storeu_ps(d + (b * 16 + s) * 16, _mm512_mul_ps(db, _mm512_cvtepi32_ps(sc)));
    }
  }
}

// The codes of sixteen rows inflated as the block tile loads them (a step
// of two groups: [g 0-15 | g+1 0-15], [g 16-31 | g+1 16-31], unsigned),
// then transposed into `codes` ([group][8] as Rows16Prepare lays them).
template <CodeKind K>
HWY_INLINE void Rows16Inflated(const BlockRows<K, 16>& rows, int64_t groups, __m512i* codes) {
  alignas(64) uint8_t step[16][64];
  for (int64_t g = 0; g < groups; g += 2) {
    for (int r = 0; r < 16; ++r) {
      VU8 c0, c1;
      BlockCodes<K>::LoadStep(rows.row0[r], rows.row1[r], g, c0, c1);
      hn::Store(c0, DU8(), step[r]);
      hn::Store(c1, DU8(), step[r] + 32);
    }
    // Group g's weights 0-15 (chunks 0-3), 16-31 (chunks 4-7); then g + 1's.
    const int at[4] = {0, 32, 16, 48};
    for (int i = 0; i < 4; ++i) {
      __m512i part[4];
      Transpose16x4(step[0] + at[i], 64, part);
      for (int j = 0; j < 4; ++j) _mm512_store_si512(codes + (g + i / 2) * 8 + (i % 2) * 4 + j, part[j]);
    }
  }
}

// q4_K's scales of sixteen rows (headers at p + r * stride: per super-block
// of 256, f16 d and dmin, then eight sub-scales and eight sub-mins, a byte
// each): d * scale and dmin * min per group of 32, [group][row].
void Rows16Q4kScales(const uint8_t* p, int64_t stride, int64_t groups, float* d, float* m) {
  static_assert(kQ4kHeaderBytes == 20, "d, dmin, 8 scales, 8 mins");
  const __m512i byte = _mm512_set1_epi32(0xFF);
  for (int64_t b = 0; b < groups / 8; ++b) {
    __m512i head[4], subs[4];
    Transpose16x4(p + b * kQ4kHeaderBytes, stride, head);      // head[0]: d | dmin << 16
    Transpose16x4(p + b * kQ4kHeaderBytes + 4, stride, subs);  // scales 0-3, 4-7, mins 0-3, 4-7
    const __m512 db = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head[0]));
    const __m512 mb = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head[0], 16)));
    for (int s = 0; s < 8; ++s) {
      const int shift = 8 * (s % 4);
      const __m512i sc = _mm512_and_si512(_mm512_srli_epi32(subs[s / 4], shift), byte);
      const __m512i mn = _mm512_and_si512(_mm512_srli_epi32(subs[2 + s / 4], shift), byte);
      _mm512_storeu_ps(d + (b * 8 + s) * 16, _mm512_mul_ps(db, _mm512_cvtepi32_ps(sc)));
      _mm512_storeu_ps(m + (b * 8 + s) * 16, _mm512_mul_ps(mb, _mm512_cvtepi32_ps(mn)));
    }
  }
}

// The nibble kinds' group g of sixteen rows (row r's bytes at
// p + r * stride + g * 16) as Rows16Prepare lays it, into eight registers.
HWY_INLINE void Rows16Nibbles(const uint8_t* p, int64_t stride, int64_t g, __m512i codes[8]) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512i packed[4];
  Transpose16x4(p + g * 16, stride, packed);
  for (int j = 0; j < 4; ++j) {
    codes[j] = _mm512_and_si512(packed[j], low);
    codes[j + 4] = _mm512_and_si512(_mm512_srli_epi16(packed[j], 4), low);
  }
}

// i8's group g of sixteen rows (row r's 32 bytes at p + r * stride + g * 32)
// as Rows16Prepare lays it, plus 128: unsigned for vpdpbusd.
HWY_INLINE void Rows16Bytes(const uint8_t* p, int64_t stride, int64_t g, __m512i codes[8]) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  Transpose16x4(p + g * 32, stride, codes);
  Transpose16x4(p + g * 32 + 16, stride, codes + 4);
  for (int j = 0; j < 8; ++j) codes[j] = _mm512_xor_si512(codes[j], flip);
}

// `with_codes` false: the scales only (a single tile of tokens then reads
// the nibble kinds' codes straight from the rows: Rows16Dot's `raw`).
template <CodeKind K>
HWY_NOINLINE void Rows16Prepare(const QuantWeights& w, int64_t r0, Rows16& out, bool with_codes = true) {
  static_assert(kRows16<K>, "a kind Rows16Prepare serves");
  const BlockRows<K, 16> rows(w, r0, 1);  // adjacent: row r at row0[0] + r * b0 (row1[0] + r * b1)
  const int64_t groups = w.k / 32;
  out.bytes.resize(static_cast<size_t>(groups * 512 + 64));
  const auto at = reinterpret_cast<uintptr_t>(out.bytes.data());
  out.codes = reinterpret_cast<__m512i*>(out.bytes.data() + ((64 - at % 64) % 64));
  out.d.resize(static_cast<size_t>(groups * 16));
  if constexpr (K == CodeKind::kI8) {
    for (int r = 0; r < 16; ++r) out.d[static_cast<size_t>(r)] = w.scales[r0 + r] * w.scale_mul;
    for (int64_t g = 0; g < groups; ++g) Rows16Bytes(rows.row0[0], rows.b0, g, out.codes + g * 8);
    return;
  } else if constexpr (K == CodeKind::kQ6k) {
    out.d.resize(static_cast<size_t>(groups * 32));
    Rows16Q6kScales(rows.headers[0], rows.b1, groups, out.d.data());
    return Rows16Inflated<K>(rows, groups, out.codes);
  } else if constexpr (K == CodeKind::kQ4k) {
    out.m.resize(static_cast<size_t>(groups * 16));
    Rows16Q4kScales(rows.headers[0], rows.b1, groups, out.d.data(), out.m.data());
  } else {
    Rows16Scales(rows.headers[0], rows.b1, groups, out.d.data());
  }
  if (!with_codes) return;
  for (int64_t g = 0; g < groups; ++g) {
    __m512i codes[8];
    Rows16Nibbles(rows.row0[0], rows.b0, g, codes);
    for (int j = 0; j < 8; ++j) _mm512_store_si512(out.codes + g * 8 + j, codes[j]);
  }
}

// acc + the products of a prepared group's eight code registers with a
// token's 32 activation codes at q (one chain, or two for short tiles).
template <bool kTwoChains>
HWY_INLINE __m512i GroupDot(__m512i acc, const __m512i* codes, const int8_t* q) {
  if constexpr (kTwoChains) {
    __m512i odd = _mm512_setzero_si512();
    for (int j = 0; j < 8; j += 2) {
      acc = DotAddBroadcast512(acc, codes[j], q + 4 * j);
      odd = DotAddBroadcast512(odd, codes[j + 1], q + 4 * j + 4);
    }
    return _mm512_add_epi32(acc, odd);
  } else {
    for (int j = 0; j < 8; ++j) acc = DotAddBroadcast512(acc, codes[j], q + 4 * j);
    return acc;
  }
}

// Memory to bring in while a tile computes (the next sixteen rows: codes
// and headers), a part of each span per group.
struct Rows16Next {
  const uint8_t* span[2] = {nullptr, nullptr};
  int64_t bytes[2] = {0, 0};
};

// T tokens (from t0) against sixteen prepared rows (from r0); `acts` holds
// the tokens' codes in weight order. q4_K: the group's float sums times
// d * scale and the token's super-block scale, less dmin * min times the
// token's scaled activation sum over the group (a.group_acts).
// `raw` (the nibble kinds): the sixteen rows' codes plane (row r at
// raw + r * raw_stride), read and transposed here instead of `rows.codes`.
template <CodeKind K, int T>
HWY_NOINLINE void Rows16Dot(const Rows16& rows, const BlockActs& a, const int8_t* acts, int64_t k, int64_t r0, int t0,
                            float* y, int64_t ldy, const Rows16Next& next, const uint8_t* raw = nullptr,
                            int64_t raw_stride = 0) {
  const int64_t groups = k / 32;
  int64_t per_group[2];
  for (int i = 0; i < 2; ++i) per_group[i] = next.bytes[i] > 0 ? (next.bytes[i] / groups + 64) / 64 * 64 : 0;
  __m512 facc[T];
  for (int t = 0; t < T; ++t) facc[t] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    for (int i = 0; i < 2; ++i) {
      const int64_t from = g * per_group[i], to = std::min(from + per_group[i], next.bytes[i]);
      for (int64_t off = from; off < to; off += 64) hwy::Prefetch(next.span[i] + off);
    }
    __m512i own[8];
    const __m512i* codes = rows.codes + g * 8;
    if constexpr (kRows16Nibbles<K>) {
      if (raw != nullptr) {
        Rows16Nibbles(raw, raw_stride, g, own);
        codes = own;
      }
    }
    const __m512 d = K == CodeKind::kI8 ? _mm512_setzero_ps() : _mm512_loadu_ps(rows.d.data() + g * 16);
    for (int t = 0; t < T; ++t) {
      const int64_t at = (t0 + t) * groups + g;
      const int8_t* q = acts + (t0 + t) * k + g * 32;
      if constexpr (K == CodeKind::kQ6k) {
        // Two sub-blocks of sixteen, each started from minus 32 times its
        // activations (the codes are unsigned), each with its own scale.
        const int16_t* sub = a.sub_sums + (t0 + t) * (k / 16) + 2 * g;
        __m512i lo = _mm512_set1_epi32(-32 * sub[0]), hi = _mm512_set1_epi32(-32 * sub[1]);
        for (int j = 0; j < 4; ++j) {
          lo = DotAddBroadcast512(lo, codes[j], q + 4 * j);
          hi = DotAddBroadcast512(hi, codes[4 + j], q + 16 + 4 * j);
        }
        const __m512 scale = _mm512_set1_ps(a.scale[(t0 + t) * a.blocks + g / 8]);
        const float* dd = rows.d.data() + g * 32;
        facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), _mm512_mul_ps(_mm512_loadu_ps(dd), scale), facc[t]);
        facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), _mm512_mul_ps(_mm512_loadu_ps(dd + 16), scale), facc[t]);
      } else if constexpr (K == CodeKind::kQ4k) {
        const __m512i sum = GroupDot<T <= 4>(_mm512_setzero_si512(), codes, q);
        const float scale = a.scale[(t0 + t) * a.blocks + g / 8];
        facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(scale)), facc[t]);
        facc[t] = _mm512_fnmadd_ps(_mm512_loadu_ps(rows.m.data() + g * 16), _mm512_set1_ps(a.group_acts[at]), facc[t]);
      } else if constexpr (K == CodeKind::kI8) {
        // The activation block's scale here, the rows' scales at the end.
        const __m512i sum = GroupDot<T <= 4>(_mm512_set1_epi32(a.group_offsets[at]), codes, q);
        facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(a.scale[at]), facc[t]);
      } else {
        const __m512i sum = GroupDot<T <= 4>(_mm512_set1_epi32(a.group_offsets[at]), codes, q);
        facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(a.scale[at])), facc[t]);
      }
    }
  }
  if constexpr (K == CodeKind::kI8) {
    const __m512 ws = _mm512_loadu_ps(rows.d.data());
    for (int t = 0; t < T; ++t) facc[t] = _mm512_mul_ps(facc[t], ws);
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + (t0 + t) * ldy + r0, facc[t]);
}

// Minus kOffset times each group's activation codes, [token][group].
template <int kOffset>
void GroupOffsets(const int8_t* codes, int n, int64_t k, std::vector<int32_t>& out) {
  const int64_t groups = k / 32;
  out.resize(static_cast<size_t>(n * groups));
  const DI32 d32;
  const VU8 offset = hn::Set(DU8(), static_cast<uint8_t>(kOffset));
  for (int64_t i = 0; i < n * groups; ++i) {
    const VI32 sums = DotAddUnsigned(offset, hn::LoadU(DI8(), codes + i * 32), hn::Zero(d32));
    out[static_cast<size_t>(i)] = -hn::GetLane(hn::SumOfLanes(d32, sums));
  }
}
#endif  // ORK_X86_DOT

#endif  // ORK_KERNELS_CPU_ROWS16_TILE_INL_H_
