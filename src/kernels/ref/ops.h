// Scalar reference kernels: the oracle every fast kernel is tested against.
// Written for clarity and exactness (double accumulation where a sum runs
// long), not speed. All tensors are row-major f32 unless a WeightView says
// otherwise; no kernel allocates except where noted.
#pragma once

#include <cstdint>
#include <span>

#include "format/gguf/ggml_type.h"
#include "ork/status.h"
#include "quant/tier.h"

namespace ork::ref {

// A weight matrix as stored: `rows` output channels of `cols` inputs each
// (GGUF ne0 = cols, ne1 = rows), either in a GGUF type (`row_bytes` per row)
// or, when `tier` is set, in an orkpack tier: rows padded to `k_stored`,
// one scale per row, and rotated along K when `rotation_block` > 0.
struct WeightView {
  GgmlType type = GgmlType::kF32;
  const char* name = nullptr;  // the tensor's name, for observers and errors
  const uint8_t* data = nullptr;
  int64_t cols = 0;
  int64_t rows = 0;
  uint64_t row_bytes = 0;

  bool is_tier = false;
  Tier tier = Tier::kF32;
  const float* scales = nullptr;
  int64_t k_stored = 0;
  int rotation_block = 0;
  uint64_t rotation_seed = 0;

  TierTensor tier_tensor() const { return {tier, data, scales, rows, k_stored}; }
};

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]
void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out);

// y[m, r] = sum_k x[m, k] * W[r, k] for m < n_tokens, over rows [row_begin, row_end).
// x has cols floats per token; y has W.rows floats per token. Rotated
// weights get rotated activations. Uses thread-local scratch.
void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, int64_t row_begin, int64_t row_end);

// Row r of W as the model sees it (cols floats: unpadded, unrotated).
void dequantize_row(const WeightView& w, int64_t r, float* out);

enum class RopeType {
  kNorm,  // rotates adjacent pairs (x[2i], x[2i+1]) — llama
  kNeox,  // rotates (x[i], x[i + n_rot/2]) — qwen2, qwen3, gpt-neox
};

struct RopeParams {
  RopeType type = RopeType::kNorm;
  int n_rot = 0;              // leading dimensions rotated; the rest pass through
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;    // linear scaling: position multiplied by this
  const float* freq_factors = nullptr;  // optional per-pair divisor of the frequency (llama3 rope_freqs)
};

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

}  // namespace ork::ref
