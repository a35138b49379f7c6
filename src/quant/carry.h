// Carrying a GGUF K-quant into ork's own tiers without a second rounding:
// a Q4_K or Q6_K tensor's codes, sub-scales and super-block scales move
// unchanged into q4k or q6k (quant/tier.h), laid out in ork's nibble and
// bit planes so the CPU's kernels inflate them as they do i4 and i6. The
// carried tensor dequantizes bit for bit to what llama.cpp's own
// dequantizer gives for the source, at 4.625 (q4k) and 6.5625 (q6k) bits
// per weight against the source's 4.5 and 6.5625.
#pragma once

#include <cstdint>
#include <optional>

#include "format/gguf/ggml_type.h"
#include "format/gguf/gguf.h"
#include "ork/status.h"
#include "quant/tier.h"

namespace ork {

// True when any matrix of the GGUF is block-quantized (Q4_0, Q4_K, IQ4_XS,
// ...), not F32, F16 or BF16: a file llama.cpp's users downloaded.
bool quantized_source(const GgufFile& gguf);

// The tier that carries `type` exactly, if any, for rows of `k` weights
// (whole super-blocks only: k % 256 == 0, as llama.cpp's K-quants are).
std::optional<Tier> carrier_tier(GgmlType type, int64_t k);

// Carries `rows` rows of `k` weights of a `type` source (rows consecutive,
// as in a GGUF) into `data` (tier_data_bytes of the carrier tier) and the
// row scales (all 1). Fails for a type or k with no carrier.
Status carry_rows(GgmlType type, const uint8_t* src, int64_t rows, int64_t k, uint8_t* data, float* scales);

}  // namespace ork
