// IEEE binary16 and bfloat16 conversions, exact and portable (no F16C needed):
// the reference path must give the same bits on every machine.
#pragma once

#include <cstdint>
#include <cstring>

namespace ork {

inline float f32_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t bits_from_f32(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  if (exponent == 0) {
    if (mantissa == 0) return f32_from_bits(sign);
    // Subnormal: normalise into an f32 normal, which always has room.
    int shift = 0;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3FF;
    return f32_from_bits(sign | static_cast<uint32_t>(127 - 15 + 1 - shift) << 23 | mantissa << 13);
  }
  if (exponent == 0x1F) return f32_from_bits(sign | 0x7F800000u | mantissa << 13);
  return f32_from_bits(sign | (exponent + 127 - 15) << 23 | mantissa << 13);
}

// Round to nearest even, with overflow to infinity and NaN kept quiet.
inline uint16_t f32_to_f16(float f) {
  const uint32_t bits = bits_from_f32(f);
  const uint32_t sign = (bits >> 16) & 0x8000;
  const uint32_t abs = bits & 0x7FFFFFFF;
  if (abs > 0x7F800000) return static_cast<uint16_t>(sign | 0x7E00);
  if (abs >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to >= 65520
  if (abs < 0x38800000) {
    // Result is subnormal or zero: f16 subnormal unit is 2^-24.
    if (abs < 0x33000000) return static_cast<uint16_t>(sign);  // below half the smallest
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - exponent;  // 14 + (112 - exponent) + 1 - 1
    uint32_t value = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (remainder > half || (remainder == half && (value & 1))) ++value;
    return static_cast<uint16_t>(sign | value);
  }
  uint32_t value = ((abs >> 23) - 127 + 15) << 10 | (abs & 0x7FFFFF) >> 13;
  const uint32_t remainder = abs & 0x1FFF;
  if (remainder > 0x1000 || (remainder == 0x1000 && (value & 1))) ++value;
  return static_cast<uint16_t>(sign | value);
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t bits = bits_from_f32(f);
  if ((bits & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace ork
