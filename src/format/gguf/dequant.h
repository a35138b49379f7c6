// Reference dequantization of GGUF tensor data to f32, bit-exact with
// ggml's own to_float for every type it accepts (checked against
// llama.cpp-dequantized fixtures). Scalar and portable: this is the oracle.
#pragma once

#include <cstdint>

#include "format/gguf/ggml_type.h"
#include "ork/status.h"

namespace ork {

// True when dequantize() handles `type`.
bool can_dequantize(GgmlType type);

// Dequantizes `n` consecutive weights starting at `src` (which must start on
// a block boundary; n a multiple of the block size). Fails only for types
// without a dequantizer.
Status dequantize(GgmlType type, const void* src, float* dst, int64_t n);

// Quantizers used to write synthetic models: round-to-nearest as ggml's
// reference quantizers do. Supported: F32, F16, BF16, Q8_0, Q4_0.
bool can_quantize(GgmlType type);
Status quantize(GgmlType type, const float* src, void* dst, int64_t n);

// The IQ4_NL / IQ4_XS non-linear 4-bit codebook.
extern const int8_t kIq4nlValues[16];

}  // namespace ork
