// The CPU engine's kernels for the token mixers that are not attention:
// LFM2's gated short convolution, Qwen3.5's causal convolution with SiLU
// and its gated delta rule (written once with Highway, like float_ops.h).
// References: ref::short_conv, ref::conv_silu, ref::delta_rule; tests in
// tests/kernels/recurrent_ops_test.cc.
#pragma once

#include <cstdint>

namespace ork::cpu {

// ref::short_conv: u_t = B_t * X_t, out_t = C_t * sum_i w[i] * u_{t-(taps-1)+i},
// the taps summed in order with fused multiply-adds in f32. Each channel of
// each token is computed the same way wherever it falls in a batch, so a
// batch and its tokens one at a time agree bit for bit.
void short_conv(const float* bcx, int n, int width, const float* w, int taps, const float* history, float* u,
                float* out);

// ref::conv_silu, the taps summed in order with fused multiply-adds in
// f32; the same per channel wherever a token falls in a batch.
void conv_silu(const float* x, int n, int width, const float* w, int taps, const float* history, float* out);

// ref::delta_rule in f32, its products reordered: per token and block of
// columns, one read-only pass for S^T k and S^T q together, then one pass
// writing decay S + k v'^T (S'^T q = decay S^T q + v' (k . q)), so the
// state is read twice and written once, its products kept in registers.
// Token by token, so a batch equals its tokens one at a time bit for bit.
void delta_rule(float* S, int k_dim, int v_dim, int n, const float* q, const float* k, const float* v, int64_t stride,
                const float* beta, const float* decay, int64_t gate_stride, float scale, float* out,
                int64_t out_stride);

// The same rule over chunks of kDeltaChunk tokens, its state products as
// small matrix products (the chunked, or WY, form prefill uses): equal to
// the recurrence up to f32 rounding in another order (1.3e-6 of the
// outputs' scale at most in the tests), not bit for bit, so a prompt
// evaluated in one batch and token by token no longer agree exactly.
// Tested against ref::delta_rule. 16 tokens a chunk:
// at a 128 x 128 state, one thread, 273k tokens/s of a head against the
// recurrence's 130k (8 tokens: 146k; 32: 208k; 64: 168k - the chunk's
// token-pair products grow with it; ork-kernels-bench
// --benchmark_filter=DeltaRule).
inline constexpr int kDeltaChunk = 16;
void delta_rule_chunked(float* S, int k_dim, int v_dim, int n, const float* q, const float* k, const float* v,
                        int64_t stride, const float* beta, const float* decay, int64_t gate_stride, float scale,
                        float* out, int64_t out_stride);

}  // namespace ork::cpu
