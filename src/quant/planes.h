// Bit-plane addressing of orkpack's row-major layout (docs/FORMAT.md):
// nibble planes pack groups of 32 weights in 16 bytes, weight 32g + j in the
// low nibble of byte 16g + j and 32g + j + 16 in its high nibble, so a SIMD
// kernel unpacks a group with one mask and one shift.
#pragma once

#include <cstdint>

namespace ork::planes {

inline uint8_t get_nibble(const uint8_t* row, int64_t e) {
  const uint8_t b = row[(e / 32) * 16 + (e % 16)];
  return (e % 32) < 16 ? (b & 0x0F) : (b >> 4);
}

inline void set_nibble(uint8_t* row, int64_t e, uint8_t v) {
  uint8_t& b = row[(e / 32) * 16 + (e % 16)];
  b = (e % 32) < 16 ? static_cast<uint8_t>((b & 0xF0) | (v & 0x0F)) : static_cast<uint8_t>((b & 0x0F) | (v << 4));
}

inline uint8_t get_bits(const uint8_t* row, int64_t e, int bits) {
  const int per_byte = 8 / bits;
  return static_cast<uint8_t>((row[e / per_byte] >> (bits * (e % per_byte))) & ((1 << bits) - 1));
}

inline void set_bits(uint8_t* row, int64_t e, int bits, uint8_t v) {
  const int per_byte = 8 / bits;
  const int shift = bits * static_cast<int>(e % per_byte);
  const auto mask = static_cast<uint8_t>(((1 << bits) - 1) << shift);
  uint8_t& b = row[e / per_byte];
  b = static_cast<uint8_t>((b & ~mask) | ((v << shift) & mask));
}

// q3k's 2-bit code plane (quant/tier.h, CarriedLayout): weight e's byte
// and shift within its 64-weight step of 16 bytes.
inline void q3k_position(int64_t e, int64_t* byte, int* shift) {
  const int64_t in_step = e % 64;
  const int64_t group = in_step / 32, half = (in_step % 32) / 16;
  *byte = (e / 64) * 16 + in_step % 16;
  *shift = static_cast<int>(2 * (group + 2 * half));
}

inline uint8_t get_q3k_low(const uint8_t* row, int64_t e) {
  int64_t byte;
  int shift;
  q3k_position(e, &byte, &shift);
  return static_cast<uint8_t>((row[byte] >> shift) & 3);
}

inline void set_q3k_low(uint8_t* row, int64_t e, uint8_t v) {
  int64_t byte;
  int shift;
  q3k_position(e, &byte, &shift);
  row[byte] = static_cast<uint8_t>((row[byte] & ~(3 << shift)) | ((v & 3) << shift));
}

}  // namespace ork::planes
