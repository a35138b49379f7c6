// The CPU engine's float kernels, written once with Highway (see
// quant_matmul.h for targets): the Hadamard rotation of activations, f32/f16
// matmul, RMSNorm, RoPE from a per-position table, SwiGLU, GeGLU, softmax and
// attention over an f16 KV cache. References: kernels/ref/ops.h and
// quant/rotation.h; tolerances are stated in tests/kernels/float_ops_test.cc.
#pragma once

#include <cstdint>

namespace ork::cpu {

// x <- H x for one vector of k values, H the randomized block Hadamard of
// quant/rotation.h given its signs (rotation_signs). Bit-exact with rotate().
void rotate(float* x, int64_t k, int block, const float* signs);

// How a float matrix stores its values.
enum class FloatWeights { kF32, kF16, kBf16 };

// y[t * ldy + r] = sum_j W[r][j] x[t][j] for rows [row_begin, row_end) and
// n tokens; W has rows of k values of the given kind, x rows of k f32. Each
// weight is widened to f32 exactly and summed in the same order whatever its
// kind, so f16 or bf16 weights holding a matrix's exact values give the f32
// matrix's results bit for bit.
void float_matmul(FloatWeights kind, const void* w, int64_t k, const float* x, int n, float* y, int64_t ldy,
                  int64_t row_begin, int64_t row_end);

// out = x / sqrt(mean(x^2) + eps) * weight
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// Rotates pairs of one head by a position's table: pair i is (x[2i],
// x[2i+1]) when `adjacent` (llama), else (x[i], x[i + n_rot/2]) (neox).
void rope(float* head, int n_rot, bool adjacent, const float* cos, const float* sin);

// out = silu(gate) * up
void swiglu(const float* gate, const float* up, int64_t n, float* out);

// out = gelu(gate) * up, GELU's tanh form (ref::geglu).
void geglu(const float* gate, const float* up, int64_t n, float* out);

// In-place softmax over n values (ref::softmax, to a few ulp; attention
// uses the same exponentials).
void softmax(float* x, int64_t n);

// f32 -> f16 (round to nearest even), for the KV cache.
void to_f16(const float* x, int64_t n, uint16_t* out);

// Attention of one query head over n_kv cached positions of an f16 cache:
// out = softmax(q . K^T * scale) V, rows `stride` elements apart. `scores`
// needs n_kv floats.
void attention_head_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv, int head_dim,
                        int64_t stride, float scale, float* scores, float* out);

// The `group` query heads (consecutive, head_dim apart in q and out) that
// share one KV head: each head's result is attention_head_f16's, bit for
// bit, but each cached key and value is widened once for the group.
// `scores` needs group * n_kv floats.
void attention_group_f16(const float* q, int group, const uint16_t* k, const uint16_t* v, int64_t n_kv, int head_dim,
                         int64_t stride, float scale, float* scores, float* out);

// Reads `words` 64-bit words as fast as the core can and returns their
// wrapping sum: the read-bandwidth probe of `ork bench`. streams: 1, or the
// words as 2 or 4 equal parts read side by side (anything else reads 1) -
// on some machines one core reads more from two streams than from one.
uint64_t stream_read(const uint64_t* p, int64_t words, int streams = 1);

}  // namespace ork::cpu
