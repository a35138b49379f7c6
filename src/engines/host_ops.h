// The ops of a forward pass that are not matmuls - norms, RoPE, SwiGLU,
// attention over the KV cache, short convolutions, DeltaNet recurrences,
// embedding lookups - as the model sees them.
// Only the CPU runs them (the NPU's datapath is the matmul); the CPU engine
// implements this on its SIMD kernels or, when set to, on the scalar
// reference, so the model never names a kernel.
#pragma once

#include <cstdint>
#include <span>

#include "core/kv_layout.h"
#include "core/op_params.h"
#include "quant/weight_view.h"

namespace ork {

// One layer's attention of n tokens at positions n_past.. over its KV
// cache. The cache layout follows the kernels: `f16` is the fast path's,
// per KV head - of f16, [kv head][position][head_dim] (one head's positions
// contiguous), or of q8_0, each head's KvQ8Layout (core/kv_layout.h) one
// after another - otherwise the reference's [position][kv_dim] of f32.
struct AttentionArgs {
  const float* q = nullptr;  // n_tokens x n_head x head_dim
  float* out = nullptr;      // the same shape
  int n_tokens = 0, n_past = 0;
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  int n_ctx = 0;             // positions the cache holds (its stride, f16 layout)
  bool f16 = true;
  const uint16_t* k16 = nullptr;  // the layer's part of the cache
  const uint16_t* v16 = nullptr;
  const float* k32 = nullptr;
  const float* v32 = nullptr;
  KvType k_type = KvType::kF16, v_type = KvType::kF16;  // the fast path's element types
  const int8_t* k8 = nullptr;  // q8_0: codes and scales of the layer's heads
  const float* k8_scales = nullptr;
  const int8_t* v8 = nullptr;
  const float* v8_scales = nullptr;
};

// One gated DeltaNet layer's recurrence over n tokens of one sequence:
// each v-head j (reading k-head j % n_k_heads) through ref::delta_rule with
// its state, q, k, v from `qkv` (n rows of qkv_stride: q of every k-head,
// then k, then v of every v-head), beta and decay per token and v-head.
struct DeltaNetArgs {
  float* state = nullptr;  // n_v_heads x k_dim x v_dim
  int n_k_heads = 0, n_v_heads = 0, k_dim = 0, v_dim = 0;
  int n_tokens = 0;
  const float* qkv = nullptr;
  int64_t qkv_stride = 0;
  const float* beta = nullptr;   // n_tokens x n_v_heads
  const float* decay = nullptr;  // n_tokens x n_v_heads
  float* out = nullptr;          // n_tokens x (n_v_heads x v_dim)
};

class HostOps {
 public:
  virtual ~HostOps() = default;
  // Whether the SIMD kernels run (else the scalar reference, f32 KV cache).
  virtual bool fast() const = 0;
  // out = x / rms(x) * weight, row by row (n rows of `width`).
  virtual void rms_norm_rows(const float* x, const float* weight, int n, int width, float eps, float* out) = 0;
  // out = silu(gate) * up over n values.
  virtual void swiglu(const float* gate, const float* up, int64_t n, float* out) = 0;
  // The rotary angles of each token's position (a batch of several
  // sequences holds several runs of positions), for rope_rows.
  virtual void set_rope_positions(std::span<const int32_t> positions, const RopeParams& p) = 0;
  // For each of n tokens (of the last set_rope_positions) and each of its
  // n_heads heads of head_dim: RMS-normalised by `norm` (head_dim weights)
  // when given, then rotated.
  virtual void rope_rows(float* x, int n, int n_heads, int head_dim, const float* norm, float eps,
                         const RopeParams& p) = 0;
  // n floats to f16, for the fast path's KV cache.
  virtual void to_f16(const float* x, int64_t n, uint16_t* out) = 0;
  // A key (or value) row of one KV head quantized into its q8_0 cache at
  // `pos` (codes and scales: the head's KvQ8Layout).
  virtual void store_kv_q8(const float* x, int head_dim, int64_t pos, bool key, int8_t* codes, float* scales) = 0;
  virtual void attention(const AttentionArgs& a) = 0;
  // LFM2's gated short convolution of n tokens (ref::short_conv).
  virtual void short_conv(const float* bcx, int n, int width, const float* w, int taps, const float* history,
                          float* u, float* out) = 0;
  // Qwen3.5's causal convolution and SiLU of n tokens (ref::conv_silu).
  virtual void conv_silu(const float* x, int n, int width, const float* w, int taps, const float* history,
                         float* out) = 0;
  virtual void delta_net(const DeltaNetArgs& a) = 0;
  // Row `token` of an embedding matrix (w.cols floats).
  virtual void embed(const WeightView& w, int32_t token, float* out) = 0;
};

}  // namespace ork
