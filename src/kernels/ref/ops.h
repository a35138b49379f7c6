// Scalar reference kernels: the oracle every fast kernel is tested against.
// Written for clarity and exactness (double accumulation where a sum runs
// long), not speed. All tensors are row-major f32 unless a WeightView says
// otherwise; no kernel allocates except where noted.
#pragma once

#include <cstdint>
#include <span>

#include "core/op_params.h"
#include "ork/status.h"
#include "quant/weight_view.h"

namespace ork::ref {

using ork::WeightView;
using ork::RopeType;
using ork::RopeParams;

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// y[m, r] = sum_k x[m, k] * W[r, k] for m < n_tokens, over rows [row_begin, row_end).
// x has cols floats per token; y has W.rows floats per token. Rotated
// weights get rotated activations. Uses thread-local scratch.
void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, int64_t row_begin, int64_t row_end);

// Rotates one head vector (head_dim floats) in place for position `pos`.
void rope(float* head, int head_dim, int64_t pos, const RopeParams& p);

// The cos and sin of each of the n_rot/2 pair angles at a position: what
// rope() applies (a fast path computes them once per position).
void rope_table(int64_t pos, const RopeParams& p, float* cos, float* sin);

// In-place softmax over n values.
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, int64_t n, float* out);

// out = gelu(gate) * up (GeGLU), GELU in its tanh form as llama.cpp's
// ggml_gelu: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
void geglu(const float* gate, const float* up, int64_t n, float* out);

// Causal attention of one query head over `n_kv` cached positions:
// out = softmax(q·K^T * scale) V, where K and V rows are `stride` floats apart.
// `scores` needs n_kv floats.
void attention_head(const float* q, const float* k, const float* v, int64_t n_kv, int head_dim, int64_t stride,
                    float scale, float* scores, float* out);

// LFM2's gated short convolution over n tokens of `width` channels: each
// token's in_proj output holds B, C and X (bcx, 3 x width per token);
// u_t = B_t * X_t and out_t = C_t * sum_{i < taps} w[i] * u_{t - (taps-1) + i}
// (w is [tap][channel], tap taps-1 the current token). The u before the
// batch come from `history` (taps - 1 rows of width, oldest first; zeros at
// the start of a sequence); `u` receives the batch's own (n x width), from
// which the next batch's history is taken.
void short_conv(const float* bcx, int n, int width, const float* w, int taps, const float* history, float* u,
                float* out);

// A causal depthwise convolution and SiLU over n tokens of `width`
// channels (Qwen3.5's DeltaNet, before q, k, v): out_t = silu(sum_{i < taps}
// w[i] * x_{t - (taps-1) + i}), w as [tap][channel], the inputs before the
// batch from `history` (taps - 1 rows, oldest first).
void conv_silu(const float* x, int n, int width, const float* w, int taps, const float* history, float* out);

// One v-head of a gated DeltaNet over n tokens, its state S (k_dim x v_dim,
// row i for key dim i) carried in and out. For each token t, with q_t and
// k_t L2-normalised (x / max(|x|, 1e-6)):
//   S = decay_t S;  v' = beta_t (v_t - S^T k_t);  S += k_t v'^T;  o_t = scale S^T q_t.
// Token t's q, k, v are at q + t * stride (k, v likewise), its beta and
// decay at beta[t * gate_stride], its output at out + t * out_stride.
// Allocates its scratch (k_dim + v_dim doubles) per call.
void delta_rule(float* S, int k_dim, int v_dim, int n, const float* q, const float* k, const float* v, int64_t stride,
                const float* beta, const float* decay, int64_t gate_stride, float scale, float* out,
                int64_t out_stride);

}  // namespace ork::ref
