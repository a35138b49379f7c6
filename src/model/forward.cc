#include "model/forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>

#include "core/thread_pool.h"
#include "engines/npu/npu_engine.h"
#include "kernels/cpu/float_ops.h"
#include "kernels/cpu/quant_matmul.h"
#include "model/forward_internal.h"
#include "quant/rotation.h"

namespace ork {

Context::Context(const Model& model, int n_ctx, ThreadPool* pool)
    : model_(model), c_(model.config()), n_ctx_(n_ctx > 0 ? n_ctx : model.config().n_ctx_train),
      pool_(pool != nullptr ? pool : &ThreadPool::global()) {}

Context::~Context() { set_npu(nullptr); }

void Context::set_npu(npu::NpuEngine* engine) {
  if (npu_ != nullptr) {
    for (const void* p : npu_pinned_) npu_->unpin(p);
  }
  npu_pinned_.clear();
  npu_ = engine;
}

// The KV cache stays mapped in the NPU's window (pinned) for the Context's
// life; re-pinned if the cache was reallocated.
void Context::pin_kv_cache() {
  if (npu_ == nullptr) return;
  std::vector<std::pair<const void*, size_t>> want;
  for (auto [p, bytes] : {std::pair<const void*, size_t>{k_cache16_.data(), k_cache16_.size() * 2},
                          {v_cache16_.data(), v_cache16_.size() * 2}, {k_cache_.data(), k_cache_.size() * 4},
                          {v_cache_.data(), v_cache_.size() * 4}}) {
    if (bytes > 0) want.emplace_back(p, bytes);
  }
  std::vector<const void*> ptrs;
  for (const auto& w : want) ptrs.push_back(w.first);
  if (ptrs == npu_pinned_) return;
  for (const void* p : npu_pinned_) npu_->unpin(p);
  npu_pinned_.clear();
  for (const auto& [p, bytes] : want) {
    if (npu_->pin(p, static_cast<int64_t>(bytes)).is_ok()) npu_pinned_.push_back(p);
  }
}

// Prefill matmuls the NPU supports run there: the input padded and rotated
// as the tensor is stored; the engine quantizes it for its datapath.
bool Context::matmul_npu(const WeightView& w, const float* x, int n, float* y) {
  if (npu_ == nullptr || n < 2) return false;
  const MatmulOp op{w.is_tier ? w.tier : Tier::kF32, n, w.is_tier ? w.k_stored : w.cols, w.rows};
  if (!w.is_tier || !npu_->supports(op).ok) {  // GGUF matrices are not orkpack tiers
    ++npu_stats_.refused;
    return false;
  }
  prepare_activations(w, x, n, false);
  MatmulJob job;
  job.op = op;
  job.w = w.tier_tensor();
  job.x = act_f32_.data();
  job.y = y;
  job.ldy = w.rows;
  auto fence = npu_->submit(job);
  if (!fence.is_ok() || !Engine::wait(*fence).is_ok()) {
    ++npu_stats_.failed;  // the CPU computes it instead
    return false;
  }
  ++npu_stats_.matmuls;
  return true;
}

void Context::set_fast_kernels(bool on) {
  if (on == fast_kernels_) return;
  fast_kernels_ = on;
  n_past_ = 0;
  act_cols_ = -1;
}

// The signs depend only on (k, seed); a model has a handful of widths.
const float* Context::rotation_signs(int64_t k, uint64_t seed) {
  for (const SignTable& s : signs_) {
    if (s.k == k && s.seed == seed) return s.signs.data();
  }
  SignTable& s = signs_.emplace_back();
  s.k = k;
  s.seed = seed;
  s.signs.resize(static_cast<size_t>(k));
  ork::rotation_signs(k, seed, s.signs.data());
  return s.signs.data();
}

bool integer_tier(const WeightView& w) { return w.is_tier && !float_tier(w.tier); }

void pad_rotate_quantize(const float* x, int64_t n, int64_t cols, int64_t k, int block, const float* signs, float* f32,
                         int8_t* q, float* scales, int32_t* sums) {
  for (int64_t m = 0; m < n; ++m) {
    float* row = f32 + m * k;
    std::copy_n(x + m * cols, cols, row);
    std::fill(row + cols, row + k, 0.0f);
    if (signs != nullptr) cpu::rotate(row, k, block, signs);
  }
  if (q != nullptr) cpu::quantize_acts(f32, static_cast<int>(n), k, q, scales, sums);
}

// Pads each token's input to k_stored, rotates it if the weight is rotated,
// and (for the integer kernels) quantizes it per token. Tokens split over
// the pool when there are several.
void Context::prepare_activations(const WeightView& w, const float* x, int n, bool quantize) {
  const int64_t k = w.is_tier ? w.k_stored : w.cols;
  act_src_.assign(x, x + static_cast<int64_t>(n) * w.cols);
  act_cols_ = w.cols;
  act_k_ = k;
  act_block_ = w.is_tier ? w.rotation_block : 0;
  act_seed_ = w.is_tier ? w.rotation_seed : 0;
  act_quantized_ = quantize;
  act_f32_.resize(static_cast<size_t>(n * k));
  if (quantize) {
    act_i8_.resize(static_cast<size_t>(n * k));
    act_scales_.resize(static_cast<size_t>(n));
    act_sums_.resize(static_cast<size_t>(n));
  }
  const float* signs = act_block_ > 0 ? rotation_signs(k, act_seed_) : nullptr;
  pool_->run(
      n,
      [&](int64_t begin, int64_t end) {
        const auto b = static_cast<size_t>(begin);
        pad_rotate_quantize(x + begin * w.cols, end - begin, w.cols, k, act_block_, signs, &act_f32_[b * k],
                            quantize ? &act_i8_[b * k] : nullptr, quantize ? &act_scales_[b] : nullptr,
                            quantize ? &act_sums_[b] : nullptr);
      },
      8);
}

bool Context::matmul_fast(const WeightView& w, const float* x, int n, float* y) {
  if (!fast_kernels_) return false;
  const bool quantized = integer_tier(w);
  const bool plain_tier = w.is_tier && !quantized;
  const bool float_gguf =
      !w.is_tier && (w.type == GgmlType::kF32 || w.type == GgmlType::kF16 || w.type == GgmlType::kBF16);
  if (!quantized && !plain_tier && !float_gguf) return false;
  const int64_t k = w.is_tier ? w.k_stored : w.cols;
  // A matmul input is rotated (and quantized) once for every matmul that
  // reads it: q, k and v share one, as do gate and up. The cache is keyed by
  // the input's contents, not its buffer, since buffers are rewritten
  // between layers.
  const size_t src_len = static_cast<size_t>(n) * static_cast<size_t>(w.cols);
  const int block = w.is_tier ? w.rotation_block : 0;
  const uint64_t seed = w.is_tier ? w.rotation_seed : 0;
  // A float matrix stored unpadded and unrotated reads the input as it is
  // (a MoE router: no copies of it to make or compare).
  const bool as_is = !quantized && k == w.cols && block == 0;
  const bool cached = as_is || (act_cols_ == w.cols && act_k_ == k && act_block_ == block && act_seed_ == seed &&
                                (act_quantized_ || !quantized) && act_src_.size() == src_len &&
                                std::equal(act_src_.begin(), act_src_.end(), x));
  if (!cached) prepare_activations(w, x, n, quantized);
  const float* act = as_is ? x : act_f32_.data();
  // Rows in blocks of 4, split over the pool.
  const int64_t blocks = (w.rows + 3) / 4;
  const int64_t min_blocks = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, n * k));
  if (quantized) {
    const QuantWeights qw = quant_weights(w.tier_tensor(), i8s_high_only_);
    const QuantActs qa{act_i8_.data(), act_scales_.data(), act_sums_.data(), k, n};
    // Decode claims shares of rows as the threads free up (a join waits for
    // the slowest thread); prefill keeps one slice per thread, since each
    // call lays the activations out into panels again.
    pool_->run(
        blocks,
        [&](int64_t b, int64_t e) { cpu::quant_matmul(qw, qa, y, w.rows, 4 * b, std::min(w.rows, 4 * e)); },
        min_blocks, n < 4 ? ThreadPool::Schedule::kShared : ThreadPool::Schedule::kStatic);
  } else {
    const bool f16 = plain_tier ? w.tier == Tier::kF16 : w.type == GgmlType::kF16;
    const bool bf16 = plain_tier ? w.tier == Tier::kBf16 : w.type == GgmlType::kBF16;
    const cpu::FloatWeights kind = f16 ? cpu::FloatWeights::kF16 : bf16 ? cpu::FloatWeights::kBf16 : cpu::FloatWeights::kF32;
    pool_->run(
        blocks,
        [&](int64_t b, int64_t e) {
          cpu::float_matmul(kind, w.data, k, act, n, y, w.rows, 4 * b, std::min(w.rows, 4 * e));
        },
        min_blocks);
  }
  return true;
}

void Context::matmul(const WeightView& w, const float* x, int n, float* y) {
  if (observer_) observer_(w, x, n);
  if (matmul_npu(w, x, n, y)) return;
  // Decoding, a quantized matrix (o, the output, a dense down) takes its
  // input the way q/k/v and the experts do, quantized into a slot, rather
  // than through the activation cache, which copies the input to compare
  // the next one with. Same kernel, same rows, same results.
  if (decode_loop(w, n)) {
    matmul_shared_input({{&w, y}}, x, 1);
    return;
  }
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
  const size_t cache = static_cast<size_t>(c_.n_layer) * static_cast<size_t>(n_ctx_) * static_cast<size_t>(c_.kv_dim());
  if (fast_kernels_ && k_cache16_.size() != cache) {
    k_cache16_.assign(cache, 0);
    v_cache16_.assign(cache, 0);
  }
  if (!fast_kernels_ && k_cache_.size() != cache) {
    k_cache_.assign(cache, 0.0f);
    v_cache_.assign(cache, 0.0f);
  }
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

RopeParams Context::rope_params() const {
  return RopeParams{c_.arch->rope_type, c_.n_rot, c_.rope_freq_base, c_.rope_freq_scale,
                          model_.rope_freqs().empty() ? nullptr : model_.rope_freqs().data()};
}

void Context::rms_norm_rows(const float* x, const float* weight, int n, int width, float* out) {
  for (int t = 0; t < n; ++t) {
    const int64_t at = static_cast<int64_t>(t) * width;
    if (fast_kernels_) {
      cpu::rms_norm(x + at, weight, width, c_.rms_eps, out + at);
    } else {
      ref::rms_norm(x + at, weight, width, c_.rms_eps, out + at);
    }
  }
}

void Context::swiglu(const float* gate, const float* up, int64_t n, float* out) {
  if (fast_kernels_) {
    cpu::swiglu(gate, up, n, out);
  } else {
    ref::swiglu(gate, up, n, out);
  }
}

bool Context::decode_loop(const WeightView& w, int n) const {
  return n == 1 && fast_kernels_ && !observer_ && integer_tier(w);
}

// QK-norm (if the layer has one) and RoPE for every head of n tokens.
void Context::rope_rows(float* x, int n, int n_heads, const float* norm) {
  const int hd = c_.head_dim;
  const int half = c_.n_rot / 2;
  const RopeParams rope = rope_params();
  for (int t = 0; t < n; ++t) {
    for (int h = 0; h < n_heads; ++h) {
      float* head = x + (static_cast<int64_t>(t) * n_heads + h) * hd;
      if (norm != nullptr) {
        if (fast_kernels_) {
          cpu::rms_norm(head, norm, hd, c_.rms_eps, head);
        } else {
          ref::rms_norm(head, norm, hd, c_.rms_eps, head);
        }
      }
      if (fast_kernels_) {
        cpu::rope(head, c_.n_rot, rope.type == RopeType::kNorm, &rope_cos_[static_cast<size_t>(t * half)],
                  &rope_sin_[static_cast<size_t>(t * half)]);
      } else {
        ref::rope(head, hd, n_past_ + t, rope);
      }
    }
  }
}

// Rows [0, n) of src (k_ or v_) into the layer's part of the k or v cache.
void Context::store_kv(int layer, int n, bool values) {
  const int kv = c_.kv_dim();
  for (int t = 0; t < n; ++t) {
    const size_t at = (static_cast<size_t>(layer) * n_ctx_ + static_cast<size_t>(n_past_ + t)) * kv;
    const float* src = &(values ? v_ : k_)[static_cast<size_t>(t) * kv];
    if (fast_kernels_) {
      // The f16 cache is laid out per KV head ([layer][kv head][position]
      // [head_dim]): attention walks one head's positions as one stream.
      const int hd = c_.head_dim;
      std::vector<uint16_t>& cache = values ? v_cache16_ : k_cache16_;
      for (int h = 0; h < c_.n_head_kv; ++h) {
        const size_t head_at =
            ((static_cast<size_t>(layer) * c_.n_head_kv + h) * n_ctx_ + static_cast<size_t>(n_past_ + t)) * hd;
        cpu::to_f16(src + h * hd, hd, &cache[head_at]);
      }
    } else {
      std::copy_n(src, kv, &(values ? v_cache_ : k_cache_)[at]);
    }
  }
}

// What follows each projection of n tokens before attention: its bias,
// QK-norm and RoPE, and into the cache. One projection at a time (0 = q,
// 1 = k, 2 = v), each touching only its own buffers, so that decode runs
// each one as soon as its rows are done.
void Context::finish_projection(int layer, int n, int which) {
  const LayerWeights& L = model_.layer(layer);
  std::vector<float>& y = which == 0 ? q_ : which == 1 ? k_ : v_;
  add_bias(y, which == 0 ? L.bq : which == 1 ? L.bk : L.bv, n);
  if (which == 2) {
    store_kv(layer, n, /*values=*/true);
    return;
  }
  const int heads = which == 0 ? c_.n_head : c_.n_head_kv;
  const std::vector<float>& norm = which == 0 ? L.q_norm : L.k_norm;
  if (c_.arch->qk_norm == QkNorm::kWhole) {
    // olmoe: normalised over the whole projection, then RoPE.
    rms_norm_rows(y.data(), norm.data(), n, heads * c_.head_dim, y.data());
    rope_rows(y.data(), n, heads, nullptr);
  } else {
    rope_rows(y.data(), n, heads, norm.empty() ? nullptr : norm.data());
  }
  if (which == 1) store_kv(layer, n, /*values=*/false);
}

// Scaled dot-product attention with grouped KV heads, causal over the cache.
// On the fast path (token, head) pairs split over the pool.
void Context::attention(int layer, int n_tokens) {
  const int hd = c_.head_dim;
  const int group = c_.n_head / c_.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t layer_off = static_cast<size_t>(layer) * n_ctx_ * c_.kv_dim();
  if (!fast_kernels_) {
    for (int t = 0; t < n_tokens; ++t) {
      const int n_kv = n_past_ + t + 1;
      for (int h = 0; h < c_.n_head; ++h) {
        const size_t kv_off = layer_off + static_cast<size_t>(h / group) * hd;
        ref::attention_head(&q_[static_cast<size_t>(t) * c_.q_dim() + h * hd], &k_cache_[kv_off], &v_cache_[kv_off],
                            n_kv, hd, c_.kv_dim(), scale, scores_.data(), &attn_[static_cast<size_t>(t) * c_.q_dim() + h * hd]);
      }
    }
    return;
  }
  // One (token, KV head) pair at a time: its group of query heads together.
  const int64_t pairs = static_cast<int64_t>(n_tokens) * c_.n_head_kv;
  pool_->run(
      pairs,
      [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> scores;
        scores.resize(static_cast<size_t>(n_ctx_) * group);
        for (int64_t i = begin; i < end; ++i) {
          const int t = static_cast<int>(i / c_.n_head_kv), kvh = static_cast<int>(i % c_.n_head_kv);
          const size_t kv_off = (static_cast<size_t>(layer) * c_.n_head_kv + kvh) * n_ctx_ * hd;
          const size_t q_off = static_cast<size_t>(t) * c_.q_dim() + static_cast<size_t>(kvh) * group * hd;
          cpu::attention_group_f16(&q_[q_off], group, &k_cache16_[kv_off], &v_cache16_[kv_off], n_past_ + t + 1, hd,
                                   hd, scale, scores.data(), &attn_[q_off]);
        }
      },
      std::max<int64_t>(1, 4096 / std::max(1, (n_past_ + n_tokens) * hd * group)));
}

Context::QuantInput& Context::input_slot(const WeightView& w, QuantInputs& cache, bool* fresh) {
  for (size_t i = 0; i < cache.used; ++i) {
    QuantInput& q = cache.slots[i];
    if (q.in_basis_of(w)) {
      *fresh = false;
      return q;
    }
  }
  if (cache.used == cache.slots.size()) cache.slots.emplace_back();
  QuantInput& q = cache.slots[cache.used++];
  set_basis(w, q);
  *fresh = true;
  return q;
}

// A slot keeps its basis from call to call, so the rotation's signs are
// looked up only when the basis changes.
void Context::set_basis(const WeightView& w, QuantInput& q) {
  if (q.in_basis_of(w) && !q.codes.empty()) return;
  q.k = w.k_stored;
  q.block = w.rotation_block;
  q.seed = w.rotation_seed;
  q.signs = q.block > 0 ? rotation_signs(q.k, q.seed) : nullptr;
  q.row.resize(static_cast<size_t>(q.k));
  q.codes.resize(static_cast<size_t>(q.k));
}

void Context::fill_input(const float* x, int64_t cols, QuantInput& q) {
  pad_rotate_quantize(x, 1, cols, q.k, q.block, q.signs, q.row.data(), q.codes.data(), &q.scale, &q.sum);
}

// Quantized activations of one input for one stored basis (k, rotation).
const Context::QuantInput& Context::quantize_input(const WeightView& w, const float* x, QuantInputs& cache) {
  bool fresh = false;
  QuantInput& q = input_slot(w, cache, &fresh);
  if (fresh) fill_input(x, w.cols, q);
  return q;
}

// Runs matmuls of one token as one parallel loop: the rows of all of them,
// in blocks of 4, split over the pool in one go, so the
// threads stream one weight after another without a join per matrix.
void Context::matmuls_together(std::span<const QuantJob> jobs, int group_size,
                               const std::function<void(int group)>& group_done) {
  std::vector<int64_t>& first_block = first_block_;
  first_block.assign(jobs.size() + 1, 0);
  for (size_t i = 0; i < jobs.size(); ++i) first_block[i + 1] = first_block[i] + (jobs[i].w.rows + 3) / 4;
  const bool grouped = group_size > 0 && group_done;
  const auto per_group = static_cast<size_t>(std::max(1, group_size));
  if (grouped) {
    const size_t groups = (jobs.size() + per_group - 1) / per_group;
    if (group_rows_left_.size() < groups) group_rows_left_ = std::vector<std::atomic<int64_t>>(groups);
    for (size_t g = 0; g < groups; ++g) group_rows_left_[g].store(0, std::memory_order_relaxed);
    for (size_t i = 0; i < jobs.size(); ++i) group_rows_left_[i / per_group].fetch_add(jobs[i].w.rows, std::memory_order_relaxed);
  }
  auto run_blocks = [&](int64_t b, int64_t e) {
    size_t i = static_cast<size_t>(std::upper_bound(first_block.begin(), first_block.end(), b) - first_block.begin()) - 1;
    for (; b < e; ++i) {
      const QuantJob& j = jobs[i];
      const int64_t end = std::min(e, first_block[i + 1]);
      const int64_t r0 = 4 * (b - first_block[i]), r1 = std::min(j.w.rows, 4 * (end - first_block[i]));
      cpu::quant_matmul(j.w, {j.in->codes.data(), &j.in->scale, &j.in->sum, j.in->k, 1}, j.y, j.w.rows, r0, r1);
      // acq_rel: the thread that counts a group down to zero sees the rows
      // every other thread wrote for it.
      if (grouped && group_rows_left_[i / per_group].fetch_sub(r1 - r0, std::memory_order_acq_rel) == r1 - r0) {
        group_done(static_cast<int>(i / per_group));
      }
      b = end;
    }
  };
  // Shares of at least 8 blocks (32 rows), claimed as the threads free up.
  pool_->run(first_block.back(), run_blocks, 8, ThreadPool::Schedule::kShared);
}

// Matmuls reading one input (q, k and v; gate and up). Decoding one token
// on the fast path they run as one parallel loop, one join instead of one
// per matrix; otherwise one after another. The same results either way.
// done(i), if given, is called once output i is complete - in the loop, by
// the thread that finished it, so that its follow-up work runs while the
// other thread goes on with the rest (each call must touch only its output).
void Context::matmul_shared_input(std::initializer_list<std::pair<const WeightView*, float*>> outs, const float* x,
                                  int n, const std::function<void(int)>& done) {
  bool together = true;
  for (const auto& [w, y] : outs) together = together && decode_loop(*w, n);
  if (!together) {
    int i = 0;
    for (const auto& [w, y] : outs) {
      matmul(*w, x, n, y);
      if (done) done(i);
      ++i;
    }
    return;
  }
  shared_in_.reset();
  jobs_.clear();
  for (const auto& [w, y] : outs) {
    jobs_.push_back({quant_weights(w->tier_tensor(), i8s_high_only_), &quantize_input(*w, x, shared_in_), y});
  }
  matmuls_together(jobs_, done ? 1 : 0, done);
}

// The embedding lookup. On the fast path a quantized, unrotated table is
// read by the SIMD kernel - the integer matmuls' view of it, so nf4 through
// its int8 codebook; anything else by the reference dequantizer.
void Context::embed(int32_t token, float* out) {
  const WeightView& w = model_.token_embd();
  if (!fast_kernels_ || !integer_tier(w) || w.rotation_block > 0) {
    dequantize_row(w, token, out);
    return;
  }
  quant_row_.resize(static_cast<size_t>(w.k_stored));
  cpu::dequantize_row(quant_weights(w.tier_tensor(), i8s_high_only_), token, quant_row_.data());
  std::copy_n(quant_row_.begin(), w.cols, out);
}

const char* Context::Profile::name(Phase phase) {
  switch (phase) {
    case kEmbed: return "embedding";
    case kQkv: return "attention: q, k, v";
    case kAttention: return "attention: KV cache";
    case kO: return "attention: o";
    case kRouter: return "router";
    case kExpertsGateUp: return "experts: gate, up";
    case kExpertsDown: return "experts: down";
    case kSharedExpert: return "shared expert";
    case kFfnGateUp: return "ffn: gate, up";
    case kFfnDown: return "ffn: down";
    case kOutput: return "output";
    case kPhases: break;
  }
  return "?";
}

void Context::set_profile(Profile* profile) {
  profile_ = profile;
  pool_->set_timing(profile != nullptr);
}

namespace {
double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void Context::lap_start() {
  lap_seconds_ = seconds_now();
  lap_loop_seconds_ = pool_->loop_seconds();
}

void Context::lap(Profile::Phase phase, uint64_t bytes) {
  const double t = seconds_now(), loops = pool_->loop_seconds();
  Profile::Entry& e = profile_->phases[static_cast<size_t>(phase)];
  e.seconds += t - lap_seconds_;
  e.loop_seconds += loops - lap_loop_seconds_;
  e.bytes += bytes;
  lap_seconds_ = t;
  lap_loop_seconds_ = loops;
}

Result<std::vector<float>> Context::eval(std::span<const int32_t> tokens, bool all_logits) {
  std::vector<float> logits;
  ORK_RETURN_IF_ERROR(eval(tokens, logits, all_logits));
  return logits;
}

uint64_t Context::memory_bytes(const ModelConfig& c, int n_ctx, int n_batch, bool fast_kernels) {
  const auto positions = static_cast<uint64_t>(std::max(n_ctx, 1));
  const auto batch = static_cast<uint64_t>(std::max(n_batch, 1));
  const uint64_t cache = 2ull * static_cast<uint64_t>(c.n_layer) * positions * static_cast<uint64_t>(c.kv_dim()) *
                         (fast_kernels ? 2 : 4);
  // x, xn, q, k, v, attn, gate, up per token; the logits; the scores.
  const uint64_t per_token = 2ull * c.n_embd + 2ull * c.q_dim() + 2ull * c.kv_dim() +
                             2ull * static_cast<uint64_t>(std::max(c.n_ff, c.n_ff_exp)) + static_cast<uint64_t>(c.n_vocab);
  return cache + 4 * (batch * per_token + positions * static_cast<uint64_t>(c.n_head));
}

Status Context::eval(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits) {
  // The forward pass allocates only its cache and scratch; a request too
  // large for the machine is an error, never an exception out of the library.
  try {
    ORK_RETURN_IF_ERROR(eval_batch(tokens, logits, all_logits));
  } catch (const std::bad_alloc&) {
    return error(StatusCode::kResourceExhausted,
                 "eval: cannot allocate the KV cache and buffers for {} positions ({:.1f} MiB); use a smaller context",
                 n_ctx_, static_cast<double>(memory_bytes(c_, n_ctx_, static_cast<int>(tokens.size()), fast_kernels_)) / (1 << 20));
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) {
      return error(StatusCode::kNumerical,
                   "eval: logit {} of token {} is {} at position {}: the model's weights hold NaN or infinite values, "
                   "or overflowed", i % static_cast<size_t>(c_.n_vocab), i / static_cast<size_t>(c_.n_vocab), logits[i],
                   n_past_ - static_cast<int>(tokens.size()));
    }
  }
  return Status::ok();
}

Status Context::eval_batch(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits) {
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
  if (profile_) lap_start();
  resize_scratch(n);
  pin_kv_cache();
  const int E = c_.n_embd;
  // The KV cache one layer's attention reads over the batch: every token
  // reads K and V of every position up to its own.
  const uint64_t kv_positions = static_cast<uint64_t>(n) * n_past_ + static_cast<uint64_t>(n) * (n + 1) / 2;
  const uint64_t layer_kv_bytes = kv_positions * 2 * static_cast<uint64_t>(c_.kv_dim()) * (fast_kernels_ ? 2 : 4);

  for (int t = 0; t < n; ++t) embed(tokens[t], &x_[static_cast<size_t>(t) * E]);

  if (fast_kernels_) {
    // The rotary angles of this batch's positions, shared by every layer and head.
    const RopeParams rope = rope_params();
    const auto half = static_cast<size_t>(c_.n_rot / 2);
    rope_cos_.resize(static_cast<size_t>(n) * half);
    rope_sin_.resize(static_cast<size_t>(n) * half);
    for (int t = 0; t < n; ++t) ref::rope_table(n_past_ + t, rope, &rope_cos_[t * half], &rope_sin_[t * half]);
  }
  if (profile_) lap(Profile::kEmbed, 0);

  for (int il = 0; il < c_.n_layer; ++il) {
    const LayerWeights& L = model_.layer(il);

    // Attention block: x += Wo · attn(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x))
    rms_norm_rows(x_.data(), L.attn_norm.data(), n, E, xn_.data());
    matmul_shared_input({{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}}, xn_.data(), n,
                        [&](int which) { finish_projection(il, n, which); });
    if (profile_) lap(Profile::kQkv, matrix_bytes(L.wq) + matrix_bytes(L.wk) + matrix_bytes(L.wv));
    attention(il, n);
    if (profile_) lap(Profile::kAttention, layer_kv_bytes);
    matmul(L.wo, attn_.data(), n, xn_.data());
    for (size_t i = 0; i < static_cast<size_t>(n) * E; ++i) x_[i] += xn_[i];
    if (profile_) lap(Profile::kO, matrix_bytes(L.wo));

    // Feed-forward block: x += W_down · (silu(W_gate·n(x)) * W_up·n(x)),
    // or the mixture of such experts.
    rms_norm_rows(x_.data(), L.ffn_norm.data(), n, E, xn_.data());
    if (c_.is_moe()) {
      moe_ffn(il, n);
      for (size_t i = 0; i < static_cast<size_t>(n) * E; ++i) x_[i] += xn_[i];
      if (profile_) lap(Profile::kExpertsDown, 0);
      continue;
    }
    matmul_shared_input({{&L.w_gate, gate_.data()}, {&L.w_up, up_.data()}}, xn_.data(), n);
    if (profile_) lap(Profile::kFfnGateUp, matrix_bytes(L.w_gate) + matrix_bytes(L.w_up));
    swiglu(gate_.data(), up_.data(), static_cast<int64_t>(n) * c_.n_ff, gate_.data());
    matmul(L.w_down, gate_.data(), n, xn_.data());
    for (size_t i = 0; i < static_cast<size_t>(n) * E; ++i) x_[i] += xn_[i];
    if (profile_) lap(Profile::kFfnDown, matrix_bytes(L.w_down));
  }

  const int first = all_logits ? 0 : n - 1;
  const int n_out = n - first;
  // xn_ is free by now: the normed rows go there.
  rms_norm_rows(&x_[static_cast<size_t>(first) * E], model_.output_norm().data(), n_out, E, xn_.data());
  logits.resize(static_cast<size_t>(n_out) * c_.n_vocab);
  matmul(model_.output(), xn_.data(), n_out, logits.data());
  n_past_ += n;
  moe_stats_.tokens += static_cast<uint64_t>(n);
  if (profile_) {
    lap(Profile::kOutput, matrix_bytes(model_.output()));
    profile_->tokens += static_cast<uint64_t>(n);
  }
  return Status::ok();
}

}  // namespace ork
