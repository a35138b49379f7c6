// The per-channel kinds' codes (i4, i5, i6, nf4, i8, i8s): how a step of
// a row inflates to code vectors (Codes), the bit-plane and codebook
// tables it reads, and how codes meet activations (MacInto). One SIMD
// target's worth. Not a header of its own: kernels/cpu/quant_matmul.cc
// includes it inside its HWY_NAMESPACE once per target (Highway's -inl
// convention), after int8_dot-inl.h. The toggle guard lets each target's
// pass include it again.
#if defined(ORK_KERNELS_CPU_CODES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ORK_KERNELS_CPU_CODES_INL_H_
#undef ORK_KERNELS_CPU_CODES_INL_H_
#else
#define ORK_KERNELS_CPU_CODES_INL_H_
#endif

// A step is the weights one pair of code vectors covers: two groups (64
// weights) on 256-bit targets, one group on 128-bit ones. Nibble planes are
// read 16 bytes per group, so a 32-byte load holds two groups; masking and
// shifting it gives the low nibbles of both groups in one vector and the
// high nibbles in the other. The activations are gathered to match:
// c0 = [g: 0..15 | g+1: 0..15], c1 = [g: 16..31 | g+1: 16..31]. (i8 rows are
// read in weight order.) A group left over on 256-bit targets is read alone.
constexpr int kStepGroups = static_cast<int>(kL / 16);

// Bit-plane lookups per lane of the step's code vectors c0 (row 0) and c1
// (row 1), as the weight index w (0..63) within the step: i5 byte w/8, bit
// w%8; i6 byte w/4, bits 2(w%4), 2(w%4)+1. On 128-bit targets the first 16
// lanes of each row are the whole step.
alignas(32) constexpr uint8_t kI5StepByte[2][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7}};
alignas(32) constexpr uint8_t kI6StepByte[2][32] = {
    {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11},
    {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15}};
alignas(32) constexpr uint8_t kI5Bit[32] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128,
                                            1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
// i6: each lane's 2-bit field of its byte (bits 2(w%4), 2(w%4)+1), and the
// field's value times 16 looked up from it where it lies: at bits 0-1 or
// 2-3 of the low nibble (entries 1..3 and 4, 8, 12), or, shifted down by
// four, of the high nibble. The two fields of a byte's nibbles never share
// a lane, so one table serves both.
alignas(32) constexpr uint8_t kI6Field[32] = {3, 12, 48, 192, 3, 12, 48, 192, 3, 12, 48, 192, 3, 12, 48, 192,
                                              3, 12, 48, 192, 3, 12, 48, 192, 3, 12, 48, 192, 3, 12, 48, 192};
alignas(16) constexpr uint8_t kI6High[16] = {0, 16, 32, 48, 16, 0, 0, 0, 32, 0, 0, 0, 48, 0, 0, 0};
// One group alone in a 256-bit vector, weight order: byte w/8 (i5), w/4 (i6).
alignas(32) constexpr uint8_t kI5GroupByte[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                  2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
alignas(32) constexpr uint8_t kI6GroupByte[32] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                                  4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7};
alignas(16) constexpr int8_t kNf4Table[16] = {-127, -88, -67, -50, -36, -23, -12, 0, 10, 20, 31, 43, 56, 71, 92, 127};
// The same levels plus 128 (1 .. 255): nf4 as unsigned codes, for the dot
// product that takes a full unsigned byte (Codes<kNf4, true>).
alignas(16) constexpr uint8_t kNf4TableU8[16] = {1, 40, 61, 78, 92, 105, 116, 128, 138, 148, 159, 171, 184, 199, 220, 255};
static_assert(kNf4TableU8[0] == kNf4Table[0] + 128 && kNf4TableU8[15] == kNf4Table[15] + 128, "the levels plus 128");

// Ors bit 4 (i5) or bits 4 and 5 (i6) into nibble codes from `bits`, a
// vector whose every 128-bit block holds the step's bit-plane bytes.
template <CodeKind K>
HWY_INLINE VU8 AddHighBits(VU8 nib, VU8 bits, const uint8_t* byte_table) {
  const DU8 du;
  const auto b = hn::TableLookupBytes(bits, hn::Load(du, byte_table));
  if constexpr (K == CodeKind::kI5) {
    return hn::Or(nib, hn::IfThenElseZero(hn::TestBit(b, hn::Load(du, kI5Bit)), hn::Set(du, 0x10)));
  } else {
    // Two lookups in kI6High in place of two bit tests, compares and
    // selects: an instruction less and two constants fewer, which let the
    // q6_K decode tile keep its sums in registers on AVX2. A field in the
    // high nibble leaves the low nibble zero, whose lookup is entry 0 (or,
    // for indices of 16 and up, zero where a target's lookup gives that).
    const auto field = hn::And(b, hn::Load(du, kI6Field));
    const auto table = hn::LoadDup128(du, kI6High);
    return hn::Or(nib, hn::Or(hn::TableLookupBytesOr0(table, field), hn::TableLookupBytes(table, hn::ShiftRight<4>(field))));
  }
}

// kNf4U8: nf4's codes plus 128, unsigned like the offset kinds (128 times
// each token's code sum comes off once per row), for x86's vpdpbusd, which
// multiplies a full unsigned byte into int32 directly: no |w| and sign per
// activation vector (prefill's nf4 tile ran at 0.73 of i4's with them). Not
// for the int16 pair path, where 255 * 127 pairs would saturate, nor for
// ARM's sdot, which multiplies signed bytes. A row's int32 sum holds
// 255 * 127 * K for any K below 66 000.
template <CodeKind K, bool kNf4U8 = false>
struct Codes {
  static_assert(!kNf4U8 || K == CodeKind::kNf4, "only nf4 has an unsigned form");
  static constexpr bool kUnsigned = K == CodeKind::kI4 || K == CodeKind::kI5 || K == CodeKind::kI6 || kNf4U8;
  static constexpr int32_t kOffset = K == CodeKind::kI4   ? 8
                                     : K == CodeKind::kI5 ? 16
                                     : K == CodeKind::kI6 ? 32
                                     : kNf4U8             ? 128
                                                          : 0;
  static constexpr bool kNibbleOrder = K != CodeKind::kI8;  // activations gathered as above
  using V = std::conditional_t<kUnsigned, VU8, VI8>;

  // The step at group g: c0 and c1 as described above.
  static HWY_INLINE void LoadStep(const uint8_t* row0, const uint8_t* row1, int64_t g, V& c0, V& c1) {
    const DU8 du;
    const DI8 di;
    if constexpr (K == CodeKind::kI8) {
      c0 = hn::LoadU(di, reinterpret_cast<const int8_t*>(row0) + g * 32);
      c1 = hn::LoadU(di, reinterpret_cast<const int8_t*>(row0) + g * 32 + kL);
      return;
    }
    const auto mask = hn::Set(du, 0x0F);
    const auto b = hn::LoadU(du, row0 + g * 16);
    VU8 lo = hn::And(b, mask), hi = hn::ShiftRight<4>(b);
    if constexpr (K == CodeKind::kI4) {
      c0 = lo;
      c1 = hi;
    } else if constexpr (K == CodeKind::kNf4 && kNf4U8) {
      const auto table = hn::LoadDup128(du, kNf4TableU8);
      c0 = hn::TableLookupBytes(table, lo);
      c1 = hn::TableLookupBytes(table, hi);
    } else if constexpr (K == CodeKind::kNf4) {
      const auto table = hn::LoadDup128(du, reinterpret_cast<const uint8_t*>(kNf4Table));
      c0 = hn::BitCast(di, hn::TableLookupBytes(table, lo));
      c1 = hn::BitCast(di, hn::TableLookupBytes(table, hi));
    } else if constexpr (K == CodeKind::kI5 || K == CodeKind::kI6) {
      VU8 bits;
      if constexpr (K == CodeKind::kI5 && kL == 32) {
        uint64_t v;
        std::memcpy(&v, row1 + g * 4, 8);
        bits = hn::BitCast(du, hn::Set(hn::Repartition<uint64_t, DU8>(), v));
      } else if constexpr (K == CodeKind::kI5) {
        uint32_t v;
        std::memcpy(&v, row1 + g * 4, 4);
        bits = hn::BitCast(du, hn::Set(hn::Repartition<uint32_t, DU8>(), v));
      } else if constexpr (kL == 32) {
        bits = hn::LoadDup128(du, row1 + g * 8);
      } else {
        uint64_t v;
        std::memcpy(&v, row1 + g * 8, 8);
        bits = hn::BitCast(du, hn::Set(hn::Repartition<uint64_t, DU8>(), v));
      }
      const auto& table = K == CodeKind::kI5 ? kI5StepByte : kI6StepByte;
      c0 = AddHighBits<K>(lo, bits, table[0]);
      c1 = AddHighBits<K>(hi, bits, table[1]);
    } else {  // kI8s: int8(((high << 4) | low) ^ 0x80) - 8
      const auto b1 = hn::LoadU(du, row1 + g * 16);
      const auto lo1 = hn::And(b1, mask), hi1 = hn::ShiftRight<4>(b1);
      const auto flip = hn::Set(du, 0x80);
      const auto eight = hn::Set(di, 8);
      c0 = hn::Sub(hn::BitCast(di, hn::Xor(hn::Or(hn::ShiftLeft<4>(lo), lo1), flip)), eight);
      c1 = hn::Sub(hn::BitCast(di, hn::Xor(hn::Or(hn::ShiftLeft<4>(hi), hi1), flip)), eight);
    }
  }

  // 256-bit targets: group g alone, in weight order.
  static HWY_INLINE V LoadGroup(const uint8_t* row0, const uint8_t* row1, int64_t g) {
    const DU8 du;
    const DI8 di;
    if constexpr (K == CodeKind::kI8) {
      return hn::LoadU(di, reinterpret_cast<const int8_t*>(row0) + g * 32);
    } else {
      const hn::Half<DU8> dh;
      const auto b = hn::LoadU(dh, row0 + g * 16);
      const auto nib = hn::Combine(du, hn::ShiftRight<4>(b), hn::And(b, hn::Set(dh, 0x0F)));
      if constexpr (K == CodeKind::kI4) {
        return nib;
      } else if constexpr (K == CodeKind::kNf4 && kNf4U8) {
        return hn::TableLookupBytes(hn::LoadDup128(du, kNf4TableU8), nib);
      } else if constexpr (K == CodeKind::kNf4) {
        return hn::BitCast(di, hn::TableLookupBytes(hn::LoadDup128(du, reinterpret_cast<const uint8_t*>(kNf4Table)), nib));
      } else if constexpr (K == CodeKind::kI5) {
        uint32_t v;
        std::memcpy(&v, row1 + g * 4, 4);
        return AddHighBits<K>(nib, hn::BitCast(du, hn::Set(hn::Repartition<uint32_t, DU8>(), v)), kI5GroupByte);
      } else if constexpr (K == CodeKind::kI6) {
        uint64_t v;
        std::memcpy(&v, row1 + g * 8, 8);
        return AddHighBits<K>(nib, hn::BitCast(du, hn::Set(hn::Repartition<uint64_t, DU8>(), v)), kI6GroupByte);
      } else {
        const auto b1 = hn::LoadU(dh, row1 + g * 16);
        const auto low = hn::Combine(du, hn::ShiftRight<4>(b1), hn::And(b1, hn::Set(dh, 0x0F)));
        const auto byte = hn::Xor(hn::Or(hn::ShiftLeft<4>(nib), low), hn::Set(du, 0x80));
        return hn::Sub(hn::BitCast(di, byte), hn::Set(di, 8));
      }
    }
  }

  static HWY_INLINE VI16 Pairs(V w, VI8 a) {
    static_assert(!kNf4U8, "255 * 127 pairs would saturate int16");
    if constexpr (kUnsigned) {
      return PairsUnsigned(w, a);
    } else {
      return PairsSigned(w, a);
    }
  }
};

// acc + every code times its activation, into int32 (codes of any kind;
// kDot: the dot-product instruction, ARM's sdot or x86's VNNI).
template <class C, bool kDot>
HWY_INLINE VI32 MacInto(typename C::V c, VI8 a, VI32 acc) {
#if ORK_DOT
  if constexpr (kDot) {
    if constexpr (C::kUnsigned) {
      return DotAddUnsigned(c, a, acc);
    } else {
      return DotAdd(c, a, acc);
    }
  } else {
    return WidenAdd(C::Pairs(c, a), acc);
  }
#else
  return WidenAdd(C::Pairs(c, a), acc);
#endif
}

// The codes a tile of kind K reads: nf4 unsigned where the dot product is
// x86's (Codes' kNf4U8).
template <CodeKind K, bool kDot>
using TileCodes = Codes<K, K == CodeKind::kNf4 && kDot && ORK_X86_DOT>;

#endif  // ORK_KERNELS_CPU_CODES_INL_H_
