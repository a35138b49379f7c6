#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/int8_dot.h"
#include "kernels/ref/int8_dot.h"
#include "quant/rotation.h"

namespace ork {

Context::Context(const Model& model, int n_ctx, ThreadPool* pool)
    : model_(model), c_(model.config()), n_ctx_(n_ctx > 0 ? n_ctx : model.config().n_ctx_train),
      pool_(pool != nullptr ? pool : &ThreadPool::global()) {
  const size_t cache = static_cast<size_t>(c_.n_layer) * static_cast<size_t>(n_ctx_) * static_cast<size_t>(c_.kv_dim());
  k_cache_.assign(cache, 0.0f);
  v_cache_.assign(cache, 0.0f);
}

void Context::prepare_activations(const ref::WeightView& w, const float* x, int n) {
  const int64_t k = w.k_stored;
  act_src_.assign(x, x + static_cast<int64_t>(n) * w.cols);
  act_cols_ = w.cols;
  act_k_ = k;
  act_block_ = w.rotation_block;
  act_seed_ = w.rotation_seed;
  act_f32_.resize(static_cast<size_t>(k));
  act_i8_.resize(static_cast<size_t>(n * k));
  act_scales_.resize(static_cast<size_t>(n));
  for (int m = 0; m < n; ++m) {
    std::fill(act_f32_.begin(), act_f32_.end(), 0.0f);
    std::copy_n(x + static_cast<int64_t>(m) * w.cols, w.cols, act_f32_.begin());
    if (w.rotation_block > 0) rotate(act_f32_.data(), k, w.rotation_block, w.rotation_seed);
    act_scales_[static_cast<size_t>(m)] =
        ref::quantize_activation_int8(act_f32_.data(), k, &act_i8_[static_cast<size_t>(m * k)]);
  }
}

bool Context::matmul_fast(const ref::WeightView& w, const float* x, int n, float* y) {
  if (!fast_kernels_ || !w.is_tier || (w.tier != Tier::kI4 && w.tier != Tier::kI8)) return false;
  const int64_t k = w.k_stored;
  // q, k and v read one input, as do gate and up: rotate and quantize it
  // once. The cache is keyed by the input's contents, not its buffer, since
  // buffers are rewritten between layers.
  const size_t src_len = static_cast<size_t>(n) * static_cast<size_t>(w.cols);
  const bool cached = act_cols_ == w.cols && act_k_ == k && act_block_ == w.rotation_block &&
                      act_seed_ == w.rotation_seed && act_src_.size() == src_len &&
                      std::equal(act_src_.begin(), act_src_.end(), x);
  if (!cached) prepare_activations(w, x, n);
  const int bits = w.tier == Tier::kI8 ? 8 : 4;
  pool_->run(
      w.rows,
      [&](int64_t begin, int64_t end) {
        for (int m = 0; m < n; ++m) {
          cpu::gemv_rows(bits, w.data, w.scales, k, &act_i8_[static_cast<size_t>(m * k)],
                         act_scales_[static_cast<size_t>(m)], y + static_cast<int64_t>(m) * w.rows, begin, end);
        }
      },
      std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, n * k)));
  return true;
}

void Context::matmul(const ref::WeightView& w, const float* x, int n, float* y) {
  if (observer_) observer_(w, x, n);
  if (matmul_fast(w, x, n, y)) return;
  // Output rows are independent: split them over the pool. Each slice runs
  // the reference kernel, so results do not depend on the thread count.
  const int64_t work_per_row = static_cast<int64_t>(n) * (w.is_tier ? w.k_stored : w.cols);
  pool_->run(
      w.rows, [&](int64_t begin, int64_t end) { ref::matmul(w, x, n, y, begin, end); },
      std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, work_per_row)));
}

void Context::resize_scratch(int n) {
  const auto un = static_cast<size_t>(n);
  x_.resize(un * c_.n_embd);
  xn_.resize(un * c_.n_embd);
  q_.resize(un * c_.q_dim());
  k_.resize(un * c_.kv_dim());
  v_.resize(un * c_.kv_dim());
  attn_.resize(un * c_.q_dim());
  gate_.resize(un * c_.n_ff);
  up_.resize(un * c_.n_ff);
  scores_.resize(static_cast<size_t>(n_ctx_));
}

namespace {

void add_bias(std::vector<float>& y, const std::vector<float>& bias, int n) {
  if (bias.empty()) return;
  const size_t width = bias.size();
  for (size_t t = 0; t < static_cast<size_t>(n); ++t) {
    for (size_t i = 0; i < width; ++i) y[t * width + i] += bias[i];
  }
}

}  // namespace

// Scaled dot-product attention with grouped KV heads, causal over the cache.
void Context::attention(int layer, int n_tokens) {
  const int hd = c_.head_dim;
  const int group = c_.n_head / c_.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t layer_off = static_cast<size_t>(layer) * n_ctx_ * c_.kv_dim();
  for (int t = 0; t < n_tokens; ++t) {
    const int n_kv = n_past_ + t + 1;
    for (int h = 0; h < c_.n_head; ++h) {
      const size_t kv_off = layer_off + static_cast<size_t>(h / group) * hd;
      ref::attention_head(&q_[static_cast<size_t>(t) * c_.q_dim() + h * hd], &k_cache_[kv_off], &v_cache_[kv_off], n_kv,
                          hd, c_.kv_dim(), scale, scores_.data(), &attn_[static_cast<size_t>(t) * c_.q_dim() + h * hd]);
    }
  }
}

Result<std::vector<float>> Context::eval(std::span<const int32_t> tokens, bool all_logits) {
  const int n = static_cast<int>(tokens.size());
  if (n == 0) return error(StatusCode::kInvalidArgument, "eval: no tokens");
  if (n_past_ + n > n_ctx_) {
    return error(StatusCode::kInvalidArgument, "eval: {} tokens at position {} exceed the context of {}", n, n_past_,
                 n_ctx_);
  }
  for (int32_t id : tokens) {
    if (id < 0 || id >= c_.n_vocab) {
      return error(StatusCode::kInvalidArgument, "eval: token id {} is outside the vocabulary (0..{})", id,
                   c_.n_vocab - 1);
    }
  }
  resize_scratch(n);
  const int E = c_.n_embd;

  for (int t = 0; t < n; ++t) ref::dequantize_row(model_.token_embd(), tokens[t], &x_[static_cast<size_t>(t) * E]);

  ref::RopeParams rope{c_.arch->rope_type, c_.n_rot, c_.rope_freq_base, c_.rope_freq_scale,
                       model_.rope_freqs().empty() ? nullptr : model_.rope_freqs().data()};

  for (int il = 0; il < c_.n_layer; ++il) {
    const LayerWeights& L = model_.layer(il);

    // Attention block: x += Wo · attn(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x))
    for (int t = 0; t < n; ++t) {
      ref::rms_norm(&x_[static_cast<size_t>(t) * E], L.attn_norm.data(), E, c_.rms_eps, &xn_[static_cast<size_t>(t) * E]);
    }
    matmul(L.wq, xn_.data(), n, q_.data());
    matmul(L.wk, xn_.data(), n, k_.data());
    matmul(L.wv, xn_.data(), n, v_.data());
    add_bias(q_, L.bq, n);
    add_bias(k_, L.bk, n);
    add_bias(v_, L.bv, n);
    for (int t = 0; t < n; ++t) {
      const int64_t pos = n_past_ + t;
      for (int h = 0; h < c_.n_head; ++h) {
        float* qh = &q_[static_cast<size_t>(t) * c_.q_dim() + h * c_.head_dim];
        if (!L.q_norm.empty()) ref::rms_norm(qh, L.q_norm.data(), c_.head_dim, c_.rms_eps, qh);
        ref::rope(qh, c_.head_dim, pos, rope);
      }
      for (int h = 0; h < c_.n_head_kv; ++h) {
        float* kh = &k_[static_cast<size_t>(t) * c_.kv_dim() + h * c_.head_dim];
        if (!L.k_norm.empty()) ref::rms_norm(kh, L.k_norm.data(), c_.head_dim, c_.rms_eps, kh);
        ref::rope(kh, c_.head_dim, pos, rope);
      }
      const size_t at = (static_cast<size_t>(il) * n_ctx_ + static_cast<size_t>(pos)) * c_.kv_dim();
      std::copy_n(&k_[static_cast<size_t>(t) * c_.kv_dim()], c_.kv_dim(), &k_cache_[at]);
      std::copy_n(&v_[static_cast<size_t>(t) * c_.kv_dim()], c_.kv_dim(), &v_cache_[at]);

    }
    attention(il, n);
    matmul(L.wo, attn_.data(), n, xn_.data());
    for (size_t i = 0; i < static_cast<size_t>(n) * E; ++i) x_[i] += xn_[i];

    // Feed-forward block: x += W_down · (silu(W_gate·n(x)) * W_up·n(x))
    for (int t = 0; t < n; ++t) {
      ref::rms_norm(&x_[static_cast<size_t>(t) * E], L.ffn_norm.data(), E, c_.rms_eps, &xn_[static_cast<size_t>(t) * E]);
    }
    matmul(L.w_gate, xn_.data(), n, gate_.data());
    matmul(L.w_up, xn_.data(), n, up_.data());
    ref::swiglu(gate_.data(), up_.data(), static_cast<int64_t>(n) * c_.n_ff, gate_.data());
    matmul(L.w_down, gate_.data(), n, xn_.data());
    for (size_t i = 0; i < static_cast<size_t>(n) * E; ++i) x_[i] += xn_[i];
  }

  const int first = all_logits ? 0 : n - 1;
  const int n_out = n - first;
  std::vector<float> normed(static_cast<size_t>(n_out) * E);
  for (int t = first; t < n; ++t) {
    ref::rms_norm(&x_[static_cast<size_t>(t) * E], model_.output_norm().data(), E, c_.rms_eps,
                  &normed[static_cast<size_t>(t - first) * E]);
  }
  std::vector<float> logits(static_cast<size_t>(n_out) * c_.n_vocab);
  matmul(model_.output(), normed.data(), n_out, logits.data());
  n_past_ += n;
  return logits;
}

}  // namespace ork
