// Carrying a GGUF quant into ork's own tiers without a second rounding:
// a Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL or IQ4_XS
// tensor's codes, sub-scales and block scales move unchanged into q2k, q3k,
// q4k, ... (quant/tier.h), laid out in ork's nibble, bit and byte planes so
// the CPU's kernels inflate them as they do i4, i5, i6 and i8. The carried
// tensor dequantizes bit for bit to what llama.cpp's own dequantizer gives
// for the source, at 2.625 (q2k, as Q2_K), 3.5625 (q3k), 4.625 (q4k), 5.625 (q5k), 6.5625 (q6k)
// and 8.5 (q80) bits per weight against the source's 3.4375, 4.5, 5.5,
// 6.5625 and 8.5 (the K-quants' sub-scales are kept unpacked).
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
// (whole blocks only: k % 256 == 0 for the K-quants, as llama.cpp's are).
std::optional<Tier> carrier_tier(GgmlType type, int64_t k);

// The GGUF type a carried tier carries.
GgmlType carried_source(Tier tier);

// Carries `rows` rows of `k` weights of a `type` source (rows consecutive,
// as in a GGUF) into `data` (tier_data_bytes of the carrier tier). Carried
// tiers have no row scales; `scales`, if not null, gets 1 for every row.
// Fails for a type or k with no carrier.
Status carry_rows(GgmlType type, const uint8_t* src, int64_t rows, int64_t k, uint8_t* data, float* scales);

}  // namespace ork
