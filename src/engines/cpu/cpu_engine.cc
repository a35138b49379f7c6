#include "engines/cpu/cpu_engine.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/float_ops.h"
#include "kernels/cpu/kv_attention.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/recurrent_ops.h"
#include "kernels/ref/ops.h"

namespace ork {

CpuEngine::CpuEngine(Kernels kernels, ThreadPool* pool)
    : kernels_(kernels), pool_(pool != nullptr ? pool : &ThreadPool::global()) {}

void CpuEngine::set_kernels(Kernels k) {
  kernels_ = k;
  act_cols_ = -1;
}

Support CpuEngine::supports(const MatmulOp& op) const {
  if (op.m < 1 || op.n < 1 || op.k < 1) return Support::no("empty matmul");
  if (op.is_tier && op.k % 32 != 0) return Support::no("a tier's stored k must be a multiple of 32");
  return Support::yes();
}

Status CpuEngine::prepare(const MatmulOp& op) {
  const Support s = supports(op);
  return s.ok ? Status::ok() : error(StatusCode::kUnsupported, "{}: {}", name(), s.why);
}

Result<FencePtr> CpuEngine::submit(const MatmulJob& job) {
  const Support s = supports(job.op);
  if (!s.ok) return error(StatusCode::kUnsupported, "{}: {}", name(), s.why);
  if (decode_loop(job)) {
    // Decoding, a quantized matrix (o, the output, a dense down) takes its
    // input the way q/k/v and the experts do, quantized into a slot, rather
    // than through the activation cache, which copies the input to compare
    // the next one with. Same kernel, same rows, same results.
    const MatmulJob one[1] = {job};
    return submit(MatmulBatch{one, 0, nullptr});
  }
  if (!matmul_fast(job)) matmul_reference(job);
  return FencePtr(std::make_shared<DoneFence>(Status::ok()));
}

void CpuEngine::rms_norm_rows(const float* x, const float* weight, int n, int width, float eps, float* out) {
  for (int t = 0; t < n; ++t) {
    const int64_t at = static_cast<int64_t>(t) * width;
    if (fast()) {
      cpu::rms_norm(x + at, weight, width, eps, out + at);
    } else {
      ref::rms_norm(x + at, weight, width, eps, out + at);
    }
  }
}

void CpuEngine::swiglu(const float* gate, const float* up, int64_t n, float* out) {
  if (fast()) {
    cpu::swiglu(gate, up, n, out);
  } else {
    ref::swiglu(gate, up, n, out);
  }
}

void CpuEngine::short_conv(const float* bcx, int n, int width, const float* w, int taps, const float* history,
                           float* u, float* out) {
  if (fast()) {
    cpu::short_conv(bcx, n, width, w, taps, history, u, out);
  } else {
    ref::short_conv(bcx, n, width, w, taps, history, u, out);
  }
}

void CpuEngine::conv_silu(const float* x, int n, int width, const float* w, int taps, const float* history,
                          float* out) {
  if (fast()) {
    cpu::conv_silu(x, n, width, w, taps, history, out);
  } else {
    ref::conv_silu(x, n, width, w, taps, history, out);
  }
}

void CpuEngine::delta_net(const DeltaNetArgs& a) {
  const int64_t k_off = static_cast<int64_t>(a.n_k_heads) * a.k_dim;  // q | k | v
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.k_dim));
  auto head = [&](int j) {
    const int kh = j % a.n_k_heads;
    float* S = a.state + static_cast<size_t>(j) * a.k_dim * a.v_dim;
    const float* q = a.qkv + static_cast<int64_t>(kh) * a.k_dim;
    const float* k = q + k_off;
    const float* v = a.qkv + 2 * k_off + static_cast<int64_t>(j) * a.v_dim;
    float* o = a.out + static_cast<int64_t>(j) * a.v_dim;
    const int64_t out_stride = static_cast<int64_t>(a.n_v_heads) * a.v_dim;
    if (fast()) {
      // A prompt's tokens in chunks (twice the recurrence's speed at a
      // 128 x 128 state, recurrent_ops.h); a decoded token or a few by the
      // recurrence, which a single token needs no chunk for.
      (a.n_tokens >= cpu::kDeltaChunk ? cpu::delta_rule_chunked : cpu::delta_rule)(
          S, a.k_dim, a.v_dim, a.n_tokens, q, k, v, a.qkv_stride, a.beta + j, a.decay + j, a.n_v_heads, scale, o,
          out_stride);
    } else {
      ref::delta_rule(S, a.k_dim, a.v_dim, a.n_tokens, q, k, v, a.qkv_stride, a.beta + j, a.decay + j, a.n_v_heads,
                      scale, o, out_stride);
    }
  };
  if (!fast()) {
    for (int j = 0; j < a.n_v_heads; ++j) head(j);
    return;
  }
  pool_->run(a.n_v_heads, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) head(static_cast<int>(j));
  });
}

void CpuEngine::set_rope_positions(std::span<const int32_t> positions, const RopeParams& p) {
  rope_positions_.assign(positions.begin(), positions.end());
  if (!fast()) return;  // the reference computes its angles per head
  // The rotary angles of this batch's positions, shared by every layer and head.
  const auto half = static_cast<size_t>(p.n_rot / 2);
  rope_cos_.resize(positions.size() * half);
  rope_sin_.resize(positions.size() * half);
  for (size_t t = 0; t < positions.size(); ++t) ref::rope_table(positions[t], p, &rope_cos_[t * half], &rope_sin_[t * half]);
}

void CpuEngine::rope_rows(float* x, int n, int n_heads, int head_dim, const float* norm, float eps,
                          const RopeParams& p) {
  const int half = p.n_rot / 2;
  for (int t = 0; t < n; ++t) {
    for (int h = 0; h < n_heads; ++h) {
      float* head = x + (static_cast<int64_t>(t) * n_heads + h) * head_dim;
      if (norm != nullptr) {
        if (fast()) {
          cpu::rms_norm(head, norm, head_dim, eps, head);
        } else {
          ref::rms_norm(head, norm, head_dim, eps, head);
        }
      }
      if (fast()) {
        cpu::rope(head, p.n_rot, p.type == RopeType::kNorm, &rope_cos_[static_cast<size_t>(t * half)],
                  &rope_sin_[static_cast<size_t>(t * half)]);
      } else {
        ref::rope(head, head_dim, rope_positions_[static_cast<size_t>(t)], p);
      }
    }
  }
}

void CpuEngine::to_f16(const float* x, int64_t n, uint16_t* out) { cpu::to_f16(x, n, out); }

void CpuEngine::store_kv_q8(const float* x, int head_dim, int64_t pos, bool key, int8_t* codes, float* scales) {
  if (key) {
    cpu::store_key_q8(x, head_dim, pos, codes, scales);
  } else {
    cpu::store_value_q8(x, head_dim, pos, codes, scales);
  }
}

// Scaled dot-product attention with grouped KV heads, causal over the cache.
// On the fast path (token, KV head) pairs split over the pool.
void CpuEngine::attention(const AttentionArgs& a) {
  const int hd = a.head_dim;
  const int group = a.n_head / a.n_head_kv;
  const int q_dim = a.n_head * hd, kv_dim = a.n_head_kv * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (!a.f16) {
    thread_local std::vector<float> scores;
    scores.resize(static_cast<size_t>(a.n_past + a.n_tokens));
    for (int t = 0; t < a.n_tokens; ++t) {
      const int n_kv = a.n_past + t + 1;
      for (int h = 0; h < a.n_head; ++h) {
        const size_t kv_off = static_cast<size_t>(h / group) * hd;
        ref::attention_head(&a.q[static_cast<size_t>(t) * q_dim + h * hd], a.k32 + kv_off, a.v32 + kv_off, n_kv, hd,
                            kv_dim, scale, scores.data(), &a.out[static_cast<size_t>(t) * q_dim + h * hd]);
      }
    }
    return;
  }
  // One (token, KV head) pair at a time: its group of query heads together.
  const int64_t pairs = static_cast<int64_t>(a.n_tokens) * a.n_head_kv;
  const KvQ8Layout q8(hd, a.n_ctx);
  pool_->run(
      pairs,
      [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> scores;
        scores.resize(static_cast<size_t>(q8.positions) * group);
        for (int64_t i = begin; i < end; ++i) {
          const int t = static_cast<int>(i / a.n_head_kv), kvh = static_cast<int>(i % a.n_head_kv);
          const size_t kv_off = static_cast<size_t>(kvh) * a.n_ctx * hd;
          const size_t q_off = static_cast<size_t>(t) * q_dim + static_cast<size_t>(kvh) * group * hd;
          const int64_t n_kv = a.n_past + t + 1;
          if (a.k_type == KvType::kQ8_0) {
            const size_t codes = kvh * q8.codes(), scales = kvh * q8.scales();
            const bool v_q8 = a.v_type == KvType::kQ8_0;
            cpu::attention_group_q8(&a.q[q_off], group, a.k8 + codes, a.k8_scales + scales, v_q8 ? a.v8 + codes : nullptr,
                                    v_q8 ? a.v8_scales + scales : nullptr, v_q8 ? nullptr : a.v16 + kv_off, n_kv, hd, scale,
                                    scores.data(), &a.out[q_off]);
          } else {
            cpu::attention_group_f16(&a.q[q_off], group, a.k16 + kv_off, a.v16 + kv_off, n_kv, hd, hd, scale,
                                     scores.data(), &a.out[q_off]);
          }
        }
      },
      std::max<int64_t>(1, 4096 / std::max(1, (a.n_past + a.n_tokens) * hd * group)));
}

// The embedding lookup. On the fast path a quantized, unrotated table is
// read by the SIMD kernel - the integer matmuls' view of it, so nf4 through
// its int8 codebook; anything else by the reference dequantizer.
void CpuEngine::embed(const WeightView& w, int32_t token, float* out) {
  const bool integer = w.is_tier && !float_tier(w.tier);
  if (!fast() || !integer || w.rotation_block > 0) {
    dequantize_row(w, token, out);
    return;
  }
  quant_row_.resize(static_cast<size_t>(w.k_stored));
  cpu::dequantize_row(quant_weights(w.tier_tensor(), false), token, quant_row_.data());
  std::copy_n(quant_row_.begin(), w.cols, out);
}

}  // namespace ork
