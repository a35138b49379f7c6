// Reading the super-block headers of the carried tiers q4k and q6k (layout
// in quant/tier.h): one header per 256 weights of a row, at the end of the
// row's plane-1 bytes.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "quant/tier.h"

namespace ork {

struct Q4kHeader {
  float d = 0.0f, dmin = 0.0f;
  const uint8_t* sc = nullptr;  // 8 sub-scales, one per 32 weights
  const uint8_t* m = nullptr;   // 8 sub-mins
};

struct Q6kHeader {
  float d = 0.0f;
  const int8_t* sc = nullptr;  // 16 sub-scales, one per 16 weights
};

inline float load_f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Super-block b's header, given where the row's headers start.
inline Q4kHeader q4k_header(const uint8_t* headers, int64_t b) {
  const uint8_t* h = headers + b * kQ4kHeaderBytes;
  return {load_f16_at(h), load_f16_at(h + 2), h + 4, h + 12};
}

inline Q6kHeader q6k_header(const uint8_t* headers, int64_t b) {
  const uint8_t* h = headers + b * kQ6kHeaderBytes;
  return {load_f16_at(h), reinterpret_cast<const int8_t*>(h + 2)};
}

}  // namespace ork
