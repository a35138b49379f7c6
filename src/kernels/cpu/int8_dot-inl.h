// The int8 dot products every integer kernel builds on, one SIMD target's
// worth: code vectors of at most 32 bytes (a 32-weight group; half of one
// on 128-bit targets), the pairwise multiply-adds into int16 and int32
// (pmaddubsw / pmaddwd on x86, a shift-split multiply elsewhere) and the
// dot-product instructions (ARM's sdot, x86's AVX-512 VNNI) where the CPU
// has them. Not a header of its own: a kernel file includes it inside its
// HWY_NAMESPACE once per non-scalar target (Highway's -inl convention);
// the toggle guard lets each target's pass include it again.
#if defined(ORK_KERNELS_CPU_INT8_DOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ORK_KERNELS_CPU_INT8_DOT_INL_H_
#undef ORK_KERNELS_CPU_INT8_DOT_INL_H_
#else
#define ORK_KERNELS_CPU_INT8_DOT_INL_H_
#endif

using DU8 = hn::CappedTag<uint8_t, 32>;
using DI8 = hn::CappedTag<int8_t, 32>;
using DI16 = hn::Repartition<int16_t, DI8>;
using DI32 = hn::Repartition<int32_t, DI8>;
using VU8 = hn::Vec<DU8>;
using VI8 = hn::Vec<DI8>;
using VI16 = hn::Vec<DI16>;
using VI32 = hn::Vec<DI32>;

constexpr size_t kL = hn::MaxLanes(DU8());  // lanes per code vector
static_assert(kL == 16 || kL == 32, "the code vectors hold half or all of a 32-weight group");

#define ORK_X86_256 (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2)
#define ORK_X86_128 (HWY_ARCH_X86 && HWY_TARGET <= HWY_SSSE3 && HWY_TARGET > HWY_AVX2)

// sum of adjacent pairs of w * a into int16, w taken as signed. Exact for
// the ranges above; the portable form splits even and odd bytes.
HWY_INLINE VI16 PairsPortable(VI8 w, VI8 a) {
  const DI16 d16;
  const auto w16 = hn::BitCast(d16, w), a16 = hn::BitCast(d16, a);
  const auto we = hn::ShiftRight<8>(hn::ShiftLeft<8>(w16)), wo = hn::ShiftRight<8>(w16);
  const auto ae = hn::ShiftRight<8>(hn::ShiftLeft<8>(a16)), ao = hn::ShiftRight<8>(a16);
  return hn::Add(hn::Mul(we, ae), hn::Mul(wo, ao));
}

// Unsigned codes (< 128) times signed activations.
HWY_INLINE VI16 PairsUnsigned(VU8 w, VI8 a) {
#if ORK_X86_256
  return VI16{_mm256_maddubs_epi16(w.raw, a.raw)};
#elif ORK_X86_128
  return VI16{_mm_maddubs_epi16(w.raw, a.raw)};
#else
  return PairsPortable(hn::BitCast(DI8(), w), a);
#endif
}

// Signed codes times signed activations (never -128).
HWY_INLINE VI16 PairsSigned(VI8 w, VI8 a) {
#if ORK_X86_256
  return VI16{_mm256_maddubs_epi16(_mm256_abs_epi8(w.raw), _mm256_sign_epi8(a.raw, w.raw))};
#elif ORK_X86_128
  return VI16{_mm_maddubs_epi16(_mm_abs_epi8(w.raw), _mm_sign_epi8(a.raw, w.raw))};
#else
  return PairsPortable(w, a);
#endif
}

// acc + (sums of adjacent int16 pairs).
HWY_INLINE VI32 WidenAdd(VI16 p, VI32 acc) {
#if ORK_X86_256
  return hn::Add(acc, VI32{_mm256_madd_epi16(p.raw, _mm256_set1_epi16(1))});
#elif ORK_X86_128
  return hn::Add(acc, VI32{_mm_madd_epi16(p.raw, _mm_set1_epi16(1))});
#else
  const auto p32 = hn::BitCast(DI32(), p);
  return hn::Add(acc, hn::Add(hn::ShiftRight<16>(hn::ShiftLeft<16>(p32)), hn::ShiftRight<16>(p32)));
#endif
}

// ARMv8.2's dot product (sdot; Cortex-A76/A55 and later): four int8
// products summed straight into each int32 lane, in place of plain NEON's
// shift-split multiply and widening adds (one instruction instead of nine
// to fourteen per 16 weights). It runs only where the CPU reports asimddp
// (targets.cc). A baseline build reaches it through inline asm, whose
// `.arch` line lets the assembler take the instruction (binutils 2.40
// ignores `.arch_extension dotprod` over plain armv8-a); that line stays in
// force for the rest of this file's assembly, harmless for a baseline
// -march (the compiler emits nothing newer), but a build for something
// beyond armv8.2-a without dotprod (say +sve) would need it widened. The
// sums are exact integers either way, so results do not change.
#define ORK_ARM_DOT (HWY_ARCH_ARM_A64 && HWY_TARGET == HWY_NEON)
#if ORK_ARM_DOT
HWY_INLINE VI32 DotAdd(VI8 w, VI8 a, VI32 acc) {
#if defined(__ARM_FEATURE_DOTPROD)
  return VI32{vdotq_s32(acc.raw, w.raw, a.raw)};
#else
  int32x4_t r = acc.raw;
  asm(".arch armv8.2-a+dotprod\n\tsdot %0.4s, %1.16b, %2.16b" : "+w"(r) : "w"(w.raw), "w"(a.raw));
  return VI32{r};
#endif
}
#endif

// x86 with AVX-512 VNNI (Ice Lake, Zen 4 and later; targets.cc lists it as
// "AVX3_VNNI" where the CPU reports it): vpdpbusd sums four unsigned-by-
// signed byte products straight into each int32 lane, in place of maddubs'
// int16 pairs and madd's widening (one instruction instead of two to three
// per 32 weights and token). Highway 1.0's AVX3 target does not enable
// VNNI, and its AVX3_DL target names the VEX form (avxvnni), which Zen 4
// lacks; inline asm takes the EVEX form on 256-bit registers, which every
// AVX-512 VNNI CPU has (the assembler emits EVEX unless told {vex}). The
// sums are the exact integers of the pair path, whose int16 sums never
// saturate here, so results do not change.
#define ORK_X86_DOT (HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL))
#if ORK_X86_DOT
HWY_INLINE VI32 DotAddUnsigned(VU8 w, VI8 a, VI32 acc) {
  __m256i r = acc.raw;
  asm("vpdpbusd %2, %1, %0" : "+v"(r) : "v"(w.raw), "v"(a.raw));
  return VI32{r};
}
// Signed codes (never -128): |w| times a with w's sign, as PairsSigned.
HWY_INLINE VI32 DotAdd(VI8 w, VI8 a, VI32 acc) {
  return DotAddUnsigned(VU8{_mm256_abs_epi8(w.raw)}, VI8{_mm256_sign_epi8(a.raw, w.raw)}, acc);
}
#elif ORK_ARM_DOT
// sdot multiplies signed bytes: codes below 128 are the same bytes.
HWY_INLINE VI32 DotAddUnsigned(VU8 w, VI8 a, VI32 acc) { return DotAdd(hn::BitCast(DI8(), w), a, acc); }
#endif
#if ORK_X86_DOT
// acc + each int32 lane's four products of u's unsigned bytes with the four
// signed bytes at p (the same four for every lane: an embedded broadcast).
HWY_INLINE __m512i DotAddBroadcast512(__m512i acc, __m512i u, const int8_t* p) {
  // The memory operand names the four bytes themselves (read as one
  // broadcast dword; asm operands do not alias), not a copy on the stack.
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}
#endif
#define ORK_DOT (ORK_ARM_DOT || ORK_X86_DOT)

#endif  // ORK_KERNELS_CPU_INT8_DOT_INL_H_
