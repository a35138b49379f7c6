// The scalar reference of attention over a q8_0 KV cache (layout:
// core/kv_layout.h): how a row is quantized, where it goes, and what
// attention over the codes computes. The SIMD kernels
// (kernels/cpu/kv_attention.h) match it to the integer in every score's
// dot products and sum the floats in another order.
#pragma once

#include <cstdint>

namespace ork::ref {

// One row of head_dim values (head_dim % 32 == 0) as q8_0: per block of 32,
// scale = max|x| / 127 and code = nearest(x * (127 / max|x|)), ties to even
// (a block of zeros: scale 0, codes 0). codes and scales are contiguous.
void quantize_q8_row(const float* x, int head_dim, int8_t* codes, float* scales);

// A key or value row of position `pos` quantized into one KV head's cache.
void store_key_q8(const float* x, int head_dim, int64_t pos, int8_t* codes, float* scales);
void store_value_q8(const float* x, int head_dim, int64_t pos, int8_t* codes, float* scales);

// The `group` query heads (head_dim apart in q and out) that share one KV
// head, over its first n_kv positions. Each head's query is quantized as a
// row; score_p = scale * sum_b qscale_b kscale_{p,b} sum_{i in b} qcode_i
// kcode_{p,i}; softmax; out = sum_p prob_p value_p, the values from a q8_0
// cache (v_codes, v_scales) or, when v_codes is null, from an f16 one (v16,
// head_dim per position). `scores` (group * ld floats, ld = n_kv rounded up
// to kKvTile) receives head g's probabilities at g * ld.
void attention_group_q8(const float* q, int group, const int8_t* k_codes, const float* k_scales,
                        const int8_t* v_codes, const float* v_scales, const uint16_t* v16, int64_t n_kv, int head_dim,
                        float scale, float* scores, float* out);

}  // namespace ork::ref
