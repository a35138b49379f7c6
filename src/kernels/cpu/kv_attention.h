// Attention over an int8 (q8_0) KV cache, the scores on the integer dot
// products (layout: core/kv_layout.h; reference: kernels/ref/kv_q8.h).
//
// Each query head is quantized like a cache row (int8 per block of 32), so
// a score is a sum over blocks of int32 dot products, each scaled once by
// the two blocks' scales: four products per instruction where the CPU has
// a dot product (vpdpbusd, sdot), a score per int32 lane (the keys'
// transposed tiles), no float work per value. The values are widened to
// floats once for the group of query heads that share them. The integers
// are the reference's; the floats are summed in another order.
#pragma once

#include <cstdint>

namespace ork::cpu {

// The `group` query heads sharing one KV head, over its first n_kv
// positions (ref::attention_group_q8): keys from a q8_0 cache, values from
// a q8_0 cache (v_codes, v_scales) or, when v_codes is null, an f16 one
// (v16). head_dim % 32 == 0. `scores` (group * ld floats, ld = n_kv
// rounded up to kKvTile) receives head g's probabilities at g * ld.
void attention_group_q8(const float* q, int group, const int8_t* k_codes, const float* k_scales,
                        const int8_t* v_codes, const float* v_scales, const uint16_t* v16, int64_t n_kv, int head_dim,
                        float scale, float* scores, float* out);

// A key or value row quantized into its KV head's cache at `pos`
// (ref::store_key_q8 / store_value_q8, the same codes).
void store_key_q8(const float* x, int head_dim, int64_t pos, int8_t* codes, float* scales);
void store_value_q8(const float* x, int head_dim, int64_t pos, int8_t* codes, float* scales);

}  // namespace ork::cpu
