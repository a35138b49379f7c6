#include "model/forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>

#include "core/thread_pool.h"
#include "core/trace.h"
#include "model/expert_pages.h"

namespace ork {

Context::Context(const Model& model, int n_ctx, ThreadPool* pool)
    : model_(model),
      c_(model.config()),
      n_ctx_(n_ctx > 0 ? n_ctx : model.config().n_ctx_train),
      pool_(pool != nullptr ? pool : &ThreadPool::global()),
      dispatch_(pool_),
      ops_(dispatch_.ops()) {
  // The routed experts' pages kept young by the global pool's idle workers
  // (model/expert_pages.h), for as long as the model lives.
  if (pool_ == &ThreadPool::global()) {
    model_.attach_once([&] {
      auto pages = std::make_shared<ExpertPages>(model_);
      pages->keep(ThreadPool::global());
      return std::shared_ptr<void>(std::move(pages));
    });
  }
}

Context::~Context() {
  set_npu(nullptr);
  if (trace_ != nullptr && model_.expert_cache() != nullptr) model_.expert_cache()->set_trace(nullptr);
}

void Context::set_npu(Engine* engine, const DispatchOptions& options) { dispatch_.set_npu(engine, options); }

void Context::set_trace(Trace* trace) {
  trace_ = trace;
  trace_track_ = trace != nullptr ? trace->track("cpu") : 0;
  dispatch_.set_trace(trace);
  if (model_.expert_cache() != nullptr) model_.expert_cache()->set_trace(trace);
}

void Context::set_fast_kernels(bool on) {
  if (on == fast_kernels()) return;
  dispatch_.set_fast_kernels(on);
  truncate(0);
}

Status Context::check_kv_types(const ModelConfig& c, KvTypes types) {
  if (types.v == KvType::kQ8_0 && types.k != KvType::kQ8_0) {
    return error(StatusCode::kInvalidArgument, "a q8_0 value cache needs a q8_0 key cache (--cache-type-k q8_0)");
  }
  if (types.k == KvType::kQ8_0 && (c.head_dim % kKvBlock != 0 || c.head_dim > 512)) {
    return error(StatusCode::kInvalidArgument,
                 "a q8_0 KV cache needs a head size divisible by {} (at most 512); this model's heads are {}", kKvBlock,
                 c.head_dim);
  }
  return Status::ok();
}

Status Context::set_kv_types(KvTypes types) {
  ORK_RETURN_IF_ERROR(check_kv_types(c_, types));
  if (types.k == kv_types_.k && types.v == kv_types_.v) return Status::ok();
  kv_types_ = types;
  for (auto* v : {&k_cache16_, &v_cache16_}) std::vector<uint16_t>().swap(*v);
  for (auto* v : {&k_codes8_, &v_codes8_}) std::vector<int8_t>().swap(*v);
  for (auto* v : {&k_scales8_, &v_scales8_}) std::vector<float>().swap(*v);
  truncate(0);
  return Status::ok();
}

// The KV cache stays mapped in the NPU's window (pinned) for the Context's
// life; re-pinned if the cache was reallocated.
// n tokens were evaluated at n_past_..: the short convolutions' window
// now starts at most conv_window() positions back.
void Context::advance(int n) {
  n_past_ += n;
  conv_lowest_ = std::max(conv_lowest_, n_past_ - static_cast<int>(conv_window(c_)));
  if (c_.has_delta_layers() && n > 1) {  // a prompt's batch: the state to come back to (truncate)
    delta_mark_state_ = delta_state_;
    delta_mark_conv_ = delta_conv_;
    delta_mark_pos_ = n_past_;
  }
}

int Context::truncate(int pos) {
  pos = std::clamp(pos, 0, n_past_);
  if (c_.n_conv_layers > 0 && pos > 0 && pos - (c_.conv_kernel - 1) < conv_lowest_) {
    pos = 0;  // the inputs the convolutions need there are gone
  }
  if (c_.has_delta_layers() && pos < n_past_) {
    // A DeltaNet's state holds every position: back to the last mark, if
    // it is at or before pos (and still this sequence's), else to 0.
    if (delta_mark_pos_ > 0 && delta_mark_pos_ <= pos) {
      delta_state_ = delta_mark_state_;
      delta_conv_ = delta_mark_conv_;
      pos = delta_mark_pos_;
    } else {
      pos = 0;
    }
  }
  if (pos < delta_mark_pos_) delta_mark_pos_ = -1;  // what comes next is another sequence's
  if (pos == 0) conv_lowest_ = 0;
  n_past_ = pos;
  return pos;
}

void Context::pin_kv_cache() {
  for (auto [p, bytes] : {std::pair<const void*, size_t>{k_cache16_.data(), k_cache16_.size() * 2},
                          {v_cache16_.data(), v_cache16_.size() * 2}, {k_cache_.data(), k_cache_.size() * 4},
                          {v_cache_.data(), v_cache_.size() * 4}, {k_codes8_.data(), k_codes8_.size()},
                          {v_codes8_.data(), v_codes8_.size()}, {k_scales8_.data(), k_scales8_.size() * 4},
                          {v_scales8_.data(), v_scales8_.size() * 4}}) {
    if (bytes > 0) (void)dispatch_.pin(p, static_cast<int64_t>(bytes));  // a window too small maps on demand
  }
}

Status Context::matmul(const WeightView& w, const float* x, int n, float* y) {
  if (observer_) observer_(w, x, n);
  return dispatch_.matmul(w, x, n, y);
}

// Matmuls reading one input (q, k and v; gate and up). With an observer
// each is seen and run in turn; otherwise the dispatcher runs them
// together (decode's single parallel loop). The same results either way.
Status Context::matmul_shared(std::initializer_list<Dispatcher::Output> outs, const float* x, int n,
                              const std::function<void(int)>& done) {
  if (!observer_) return dispatch_.matmul_shared(std::span<const Dispatcher::Output>(outs.begin(), outs.size()), x, n, done);
  int i = 0;
  for (const Dispatcher::Output& o : outs) {
    ORK_RETURN_IF_ERROR(matmul(*o.w, x, n, o.y));
    if (done) done(i);
    ++i;
  }
  return Status::ok();
}

void Context::resize_scratch(int n) {
  const auto un = static_cast<size_t>(n);
  x_.resize(un * c_.n_embd);
  xn_.resize(un * c_.n_embd);
  q_.resize(un * c_.q_dim() * (c_.arch->gated_attention ? 2 : 1));
  if (c_.arch->gated_attention) attn_gate_.resize(un * c_.q_dim());
  k_.resize(un * c_.kv_dim());
  v_.resize(un * c_.kv_dim());
  attn_.resize(un * c_.q_dim());
  gate_.resize(un * c_.n_ff);
  up_.resize(un * c_.n_ff);
  const size_t cache = static_cast<size_t>(c_.n_kv_layers) * static_cast<size_t>(n_ctx_) * static_cast<size_t>(c_.kv_dim());
  const size_t heads = static_cast<size_t>(c_.n_kv_layers) * static_cast<size_t>(c_.n_head_kv);
  const KvQ8Layout q8(c_.head_dim, n_ctx_);
  if (fast_kernels()) {
    if (kv_types_.k == KvType::kF16 && k_cache16_.size() != cache) k_cache16_.assign(cache, 0);
    if (kv_types_.v == KvType::kF16 && v_cache16_.size() != cache) v_cache16_.assign(cache, 0);
    if (kv_types_.k == KvType::kQ8_0 && k_codes8_.size() != heads * q8.codes()) {
      k_codes8_.assign(heads * q8.codes(), 0);
      k_scales8_.assign(heads * q8.scales(), 0.0f);
    }
    if (kv_types_.v == KvType::kQ8_0 && v_codes8_.size() != heads * q8.codes()) {
      v_codes8_.assign(heads * q8.codes(), 0);
      v_scales8_.assign(heads * q8.scales(), 0.0f);
    }
  }
  if (!fast_kernels() && k_cache_.size() != cache) {
    k_cache_.assign(cache, 0.0f);
    v_cache_.assign(cache, 0.0f);
  }
  if (c_.n_conv_layers > 0) {
    const size_t E = static_cast<size_t>(c_.n_embd);
    bcx_.resize(un * 3 * E);
    conv_u_.resize(un * E);
    conv_y_.resize(un * E);
    conv_history_.resize(static_cast<size_t>(c_.conv_kernel - 1) * E);
    conv_ring_.resize(static_cast<size_t>(c_.n_conv_layers) * conv_window() * E);
  }
  if (c_.has_delta_layers()) {
    const auto qkv = static_cast<size_t>(c_.ssm_qkv_dim()), inner = static_cast<size_t>(c_.ssm_inner());
    const auto nv = static_cast<size_t>(c_.ssm_v_heads), taps = static_cast<size_t>(c_.ssm_conv_kernel);
    const auto layers = static_cast<size_t>(c_.n_delta_layers);
    dqkv_.resize(un * qkv);
    dconv_.resize(un * qkv);
    dz_.resize(un * inner);
    dout_.resize(un * inner);
    dbeta_.resize(un * nv);
    dalpha_.resize(un * nv);
    ddecay_.resize(un * nv);
    delta_state_.resize(layers * nv * static_cast<size_t>(c_.ssm_k_dim) * static_cast<size_t>(c_.ssm_v_dim));
    delta_conv_.resize(layers * (taps - 1) * qkv);
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

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

RopeParams Context::rope_params() const {
  return RopeParams{c_.arch->rope_type, c_.n_rot, c_.rope_freq_base, c_.rope_freq_scale,
                    model_.rope_freqs().empty() ? nullptr : model_.rope_freqs().data()};
}

// Rows [0, n) of k_ or v_ into the layer's part of the k or v cache of
// each row's context, at its next positions.
void Context::store_kv(int layer, int /*n*/, bool values) {
  const int kv = c_.kv_dim();
  const int slot = c_.kv_slot[static_cast<size_t>(layer)];
  for (const Segment& seg : segments_) {
    Context& into = *seg.ctx;
    for (int t = 0; t < seg.n; ++t) {
      const float* src = &(values ? v_ : k_)[static_cast<size_t>(seg.row0 + t) * kv];
      const size_t pos = static_cast<size_t>(into.n_past_ + t);
      if (fast_kernels() && (values ? kv_types_.v : kv_types_.k) == KvType::kQ8_0) {
        // q8_0: each KV head's KvQ8Layout, one after another.
        const int hd = c_.head_dim;
        const KvQ8Layout q8(hd, into.n_ctx_);
        for (int h = 0; h < c_.n_head_kv; ++h) {
          const size_t head = static_cast<size_t>(slot) * c_.n_head_kv + h;
          ops_.store_kv_q8(src + h * hd, hd, static_cast<int64_t>(pos), !values,
                           &(values ? into.v_codes8_ : into.k_codes8_)[head * q8.codes()],
                           &(values ? into.v_scales8_ : into.k_scales8_)[head * q8.scales()]);
        }
      } else if (fast_kernels()) {
        // The f16 cache is laid out per KV head ([layer][kv head][position]
        // [head_dim]): attention walks one head's positions as one stream.
        const int hd = c_.head_dim;
        std::vector<uint16_t>& cache = values ? into.v_cache16_ : into.k_cache16_;
        for (int h = 0; h < c_.n_head_kv; ++h) {
          const size_t head_at = ((static_cast<size_t>(slot) * c_.n_head_kv + h) * into.n_ctx_ + pos) * hd;
          ops_.to_f16(src + h * hd, hd, &cache[head_at]);
        }
      } else {
        const size_t at = (static_cast<size_t>(slot) * into.n_ctx_ + pos) * kv;
        std::copy_n(src, kv, &(values ? into.v_cache_ : into.k_cache_)[at]);
      }
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
  if (which == 0 && c_.arch->gated_attention) {
    // [q | gate] per head, side by side: q packed to q_dim per token, the
    // gates aside (each gate is copied before any query lands on it).
    const size_t hd = static_cast<size_t>(c_.head_dim), qd = static_cast<size_t>(c_.q_dim());
    for (size_t t = 0; t < static_cast<size_t>(n); ++t) {
      for (size_t h = 0; h < static_cast<size_t>(c_.n_head); ++h) {
        const float* src = &q_[t * 2 * qd + h * 2 * hd];
        std::copy_n(src + hd, hd, &attn_gate_[t * qd + h * hd]);
        std::copy(src, src + hd, &q_[t * qd + h * hd]);
      }
    }
  }
  const int heads = which == 0 ? c_.n_head : c_.n_head_kv;
  const std::vector<float>& norm = which == 0 ? L.q_norm : L.k_norm;
  const RopeParams rope = rope_params();
  if (c_.arch->qk_norm == QkNorm::kWhole) {
    // olmoe: normalised over the whole projection, then RoPE.
    ops_.rms_norm_rows(y.data(), norm.data(), n, heads * c_.head_dim, c_.rms_eps, y.data());
    ops_.rope_rows(y.data(), n, heads, c_.head_dim, nullptr, c_.rms_eps, rope);
  } else {
    ops_.rope_rows(y.data(), n, heads, c_.head_dim, norm.empty() ? nullptr : norm.data(), c_.rms_eps, rope);
  }
  if (which == 1) store_kv(layer, n, /*values=*/false);
}

// Each context's rows over its own cache.
void Context::attention(int layer, int /*n_tokens*/) {
  for (const Segment& seg : segments_) {
    const Context& from = *seg.ctx;
    AttentionArgs a;
    a.q = &q_[static_cast<size_t>(seg.row0) * c_.q_dim()];
    a.out = &attn_[static_cast<size_t>(seg.row0) * c_.q_dim()];
    a.n_tokens = seg.n;
    a.n_past = from.n_past_;
    a.n_head = c_.n_head;
    a.n_head_kv = c_.n_head_kv;
    a.head_dim = c_.head_dim;
    a.n_ctx = from.n_ctx_;
    a.f16 = fast_kernels();
    const auto slot = static_cast<size_t>(c_.kv_slot[static_cast<size_t>(layer)]);
    const size_t layer_off = slot * from.n_ctx_ * c_.kv_dim();
    if (a.f16) {
      a.k_type = kv_types_.k;
      a.v_type = kv_types_.v;
      const KvQ8Layout q8(c_.head_dim, from.n_ctx_);
      const size_t head0 = slot * static_cast<size_t>(c_.n_head_kv);
      if (a.k_type == KvType::kQ8_0) {
        a.k8 = &from.k_codes8_[head0 * q8.codes()];
        a.k8_scales = &from.k_scales8_[head0 * q8.scales()];
      } else {
        a.k16 = &from.k_cache16_[layer_off];
      }
      if (a.v_type == KvType::kQ8_0) {
        a.v8 = &from.v_codes8_[head0 * q8.codes()];
        a.v8_scales = &from.v_scales8_[head0 * q8.scales()];
      } else {
        a.v16 = &from.v_cache16_[layer_off];
      }
    } else {
      a.k32 = &from.k_cache_[layer_off];
      a.v32 = &from.v_cache_[layer_off];
    }
    ops_.attention(a);
  }
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
    case kConv: return "short conv";
    case kDeltaIn: return "deltanet: in";
    case kDeltaState: return "deltanet: state";
    case kDeltaOut: return "deltanet: out";
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

void Context::lap_start() {
  lap_seconds_ = seconds_now();
  lap_loop_seconds_ = pool_->loop_seconds();
}

void Context::lap(Profile::Phase phase, uint64_t bytes) {
  if (profile_ == nullptr && trace_ == nullptr) return;
  const double t = seconds_now(), loops = pool_->loop_seconds();
  if (profile_ != nullptr) {
    Profile::Entry& e = profile_->phases[static_cast<size_t>(phase)];
    e.seconds += t - lap_seconds_;
    e.loop_seconds += loops - lap_loop_seconds_;
    e.bytes += bytes;
  }
  if (trace_ != nullptr) {
    const double dur_us = (t - lap_seconds_) * 1e6;
    trace_->add_span(Profile::name(phase), trace_track_, trace_->now_us() - dur_us, dur_us, n_past_);
  }
  lap_seconds_ = t;
  lap_loop_seconds_ = loops;
}

Result<std::vector<float>> Context::eval(std::span<const int32_t> tokens, bool all_logits) {
  std::vector<float> logits;
  ORK_RETURN_IF_ERROR(eval(tokens, logits, all_logits));
  return logits;
}

uint64_t Context::kv_bytes_per_position(const ModelConfig& c, bool fast_kernels, KvTypes kv_types) {
  const auto heads = static_cast<uint64_t>(c.n_kv_layers) * static_cast<uint64_t>(c.n_head_kv);
  const auto hd = static_cast<uint64_t>(c.head_dim);
  if (!fast_kernels) return 2 * heads * hd * 4;
  auto one = [&](KvType t) { return t == KvType::kQ8_0 ? hd + hd / kKvBlock * 4 : hd * 2; };
  return heads * (one(kv_types.k) + one(kv_types.v));
}

uint64_t Context::memory_bytes(const ModelConfig& c, int n_ctx, int n_batch, bool fast_kernels, KvTypes kv_types) {
  const auto positions = static_cast<uint64_t>(std::max(n_ctx, 1));
  const auto batch = static_cast<uint64_t>(std::max(n_batch, 1));
  const uint64_t cache =
      (positions + kKvTile) * kv_bytes_per_position(c, fast_kernels, kv_types);  // q8_0 rounds up to whole tiles
  // Short convolutions: their window of past inputs, and B, C, X, u and y per token.
  const uint64_t conv = 4ull * static_cast<uint64_t>(c.n_conv_layers) * static_cast<uint64_t>(conv_window(c)) *
                        static_cast<uint64_t>(c.n_embd);
  const uint64_t conv_per_token = c.n_conv_layers > 0 ? 5ull * c.n_embd : 0;
  // DeltaNets: each layer's state and convolution inputs, twice (the copy
  // truncate goes back to); the batch's projections, gates and outputs.
  const auto qkv = static_cast<uint64_t>(c.ssm_qkv_dim()), inner = static_cast<uint64_t>(c.ssm_inner());
  const uint64_t delta = c.has_delta_layers()
                             ? 2ull * 4ull * static_cast<uint64_t>(c.n_delta_layers) *
                                   (static_cast<uint64_t>(c.ssm_v_heads) * c.ssm_k_dim * c.ssm_v_dim +
                                    static_cast<uint64_t>(c.ssm_conv_kernel - 1) * qkv)
                             : 0;
  const uint64_t delta_per_token = c.has_delta_layers() ? 3 * qkv + 2 * inner + 3ull * c.ssm_v_heads : 0;
  // x, xn, q, k, v, attn, gate, up per token; the logits; the scores.
  const uint64_t per_token = 2ull * c.n_embd + 2ull * c.q_dim() + 2ull * c.kv_dim() +
                             2ull * static_cast<uint64_t>(std::max(c.n_ff, c.n_ff_exp)) + static_cast<uint64_t>(c.n_vocab);
  return cache + conv + delta +
         4 * (batch * (per_token + conv_per_token + delta_per_token) + positions * static_cast<uint64_t>(c.n_head));
}

uint64_t Context::recurrent_bytes_per_token(const ModelConfig& c) {
  const uint64_t delta = c.has_delta_layers()
                             ? static_cast<uint64_t>(c.n_delta_layers) *
                                   (2ull * 4 * c.ssm_v_heads * c.ssm_k_dim * c.ssm_v_dim +
                                    4ull * (c.ssm_conv_kernel - 1) * static_cast<uint64_t>(c.ssm_qkv_dim()))
                             : 0;
  const uint64_t conv = c.n_conv_layers > 0 ? 4ull * c.n_conv_layers * (c.conv_kernel - 1) * c.n_embd : 0;
  return delta + conv;
}

Status Context::eval_observing_every_output(std::span<const int32_t> tokens, std::vector<float>& logits) {
  observe_every_output_ = true;
  struct Reset {
    bool& on;
    ~Reset() { on = false; }
  } reset{observe_every_output_};
  return eval(tokens, logits, /*all_logits=*/false);
}

Status Context::eval(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits) {
  // The forward pass allocates only its cache and scratch; a request too
  // large for the machine is an error, never an exception out of the library.
  try {
    ORK_RETURN_IF_ERROR(eval_checked(tokens, logits, all_logits));
  } catch (const std::bad_alloc&) {
    return error(StatusCode::kResourceExhausted,
                 "eval: cannot allocate the KV cache and buffers for {} positions ({:.1f} MiB); use a smaller context",
                 n_ctx_, static_cast<double>(memory_bytes(c_, n_ctx_, static_cast<int>(tokens.size()), fast_kernels(), kv_types_)) /
                     (1 << 20));
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

// Attention block: x += Wo · attn(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x))
Status Context::attention_block(int il, int n) {
  const LayerWeights& L = model_.layer(il);
  const int E = c_.n_embd;
  // The KV cache one layer's attention reads over the batch: every token
  // reads K and V of every position of its sequence up to its own.
  uint64_t kv_positions = 0;
  for (const Segment& seg : segments_) {
    kv_positions += static_cast<uint64_t>(seg.n) * seg.ctx->n_past_ + static_cast<uint64_t>(seg.n) * (seg.n + 1) / 2;
  }
  const uint64_t layer_kv_bytes =
      kv_positions * kv_bytes_per_position(c_, fast_kernels(), kv_types_) / static_cast<uint64_t>(c_.n_kv_layers);
  ops_.rms_norm_rows(x_.data(), L.attn_norm.data(), n, E, c_.rms_eps, xn_.data());
  ORK_RETURN_IF_ERROR(matmul_shared({{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}}, xn_.data(), n,
                                    [&](int which) { finish_projection(il, n, which); }));
  lap(Profile::kQkv, matrix_bytes(L.wq) + matrix_bytes(L.wk) + matrix_bytes(L.wv));
  attention(il, n);
  if (c_.arch->gated_attention) {
    for (size_t i = 0; i < static_cast<size_t>(n) * c_.q_dim(); ++i) {
      attn_[i] *= 1.0f / (1.0f + std::exp(-attn_gate_[i]));
    }
  }
  lap(Profile::kAttention, layer_kv_bytes);
  ORK_RETURN_IF_ERROR(matmul(L.wo, attn_.data(), n, xn_.data()));
  for (size_t i = 0; i < static_cast<size_t>(n) * E; ++i) x_[i] += xn_[i];
  lap(Profile::kO, matrix_bytes(L.wo));
  return Status::ok();
}

// Feed-forward block: x += W_down · (silu(W_gate·n(x)) * W_up·n(x)), or the
// mixture of such experts.
Status Context::ffn_block(int il, int n) {
  const LayerWeights& L = model_.layer(il);
  const int E = c_.n_embd;
  ops_.rms_norm_rows(x_.data(), L.ffn_norm.data(), n, E, c_.rms_eps, xn_.data());
  if (c_.moe_layer(il)) {
    ORK_RETURN_IF_ERROR(moe_ffn(il, n));
    for (size_t i = 0; i < static_cast<size_t>(n) * E; ++i) x_[i] += xn_[i];
    lap(Profile::kExpertsDown, 0);
    return Status::ok();
  }
  ORK_RETURN_IF_ERROR(matmul_shared({{&L.w_gate, gate_.data()}, {&L.w_up, up_.data()}}, xn_.data(), n));
  lap(Profile::kFfnGateUp, matrix_bytes(L.w_gate) + matrix_bytes(L.w_up));
  ops_.swiglu(gate_.data(), up_.data(), static_cast<int64_t>(n) * c_.n_ff, gate_.data());
  ORK_RETURN_IF_ERROR(matmul(L.w_down, gate_.data(), n, xn_.data()));
  for (size_t i = 0; i < static_cast<size_t>(n) * E; ++i) x_[i] += xn_[i];
  lap(Profile::kFfnDown, matrix_bytes(L.w_down));
  return Status::ok();
}

Status Context::check_batch(std::span<const int32_t> tokens) const {
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
  return Status::ok();
}

Status Context::eval_checked(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits) {
  ORK_RETURN_IF_ERROR(check_batch(tokens));
  segments_.assign(1, Segment{this, 0, static_cast<int>(tokens.size())});
  return eval_batch(tokens, logits, all_logits);
}

Status Context::eval_together(std::span<Context* const> contexts, std::span<const std::span<const int32_t>> tokens,
                              std::vector<float>& logits) {
  if (contexts.empty() || contexts.size() != tokens.size()) {
    return error(StatusCode::kInvalidArgument, "eval_together: {} contexts for {} token lists", contexts.size(),
                 tokens.size());
  }
  Context& lead = *contexts[0];
  std::vector<int32_t> all;
  std::vector<Segment> segments;
  for (size_t i = 0; i < contexts.size(); ++i) {
    Context* c = contexts[i];
    if (&c->model_ != &lead.model_ || c->fast_kernels() != lead.fast_kernels()) {
      return error(StatusCode::kInvalidArgument, "eval_together: context {} runs another model or other kernels", i);
    }
    for (size_t j = 0; j < i; ++j) {
      if (contexts[j] == c) return error(StatusCode::kInvalidArgument, "eval_together: context {} is given twice", i);
    }
    ORK_RETURN_IF_ERROR(c->check_batch(tokens[i]));
    segments.push_back(Segment{c, static_cast<int>(all.size()), static_cast<int>(tokens[i].size())});
    all.insert(all.end(), tokens[i].begin(), tokens[i].end());
  }
  try {
    // The others' caches exist before the batch writes them.
    for (Context* c : contexts.subspan(1)) c->resize_scratch(1);
    lead.segments_ = std::move(segments);
    ORK_RETURN_IF_ERROR(lead.eval_batch(all, logits, false));
  } catch (const std::bad_alloc&) {
    return error(StatusCode::kResourceExhausted, "eval: cannot allocate the KV caches and buffers of {} sequences",
                 contexts.size());
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) {
      return error(StatusCode::kNumerical, "eval: logit {} of sequence {} is {}: the model's weights hold NaN or "
                   "infinite values, or overflowed", i % static_cast<size_t>(lead.c_.n_vocab),
                   i / static_cast<size_t>(lead.c_.n_vocab), logits[i]);
    }
  }
  return Status::ok();
}

// The batch of segments_ (checked): every row through the layers, then the
// logits of every row (all_logits, one segment) or of each segment's last.
Status Context::eval_batch(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits) {
  const int n = static_cast<int>(tokens.size());
  // A decode step's bounds, for the overlay's host budget (a share of
  // decode's own time).
  struct Step {
    Dispatcher* d;
    ~Step() {
      if (d != nullptr) d->end_step();
    }
  } step{n == 1 ? &dispatch_ : nullptr};
  if (n == 1) dispatch_.begin_step();
  const bool timed = profile_ != nullptr || trace_ != nullptr;
  if (timed) lap_start();
  resize_scratch(n);
  pin_kv_cache();
  const int E = c_.n_embd;
  for (int t = 0; t < n; ++t) ops_.embed(model_.token_embd(), tokens[t], &x_[static_cast<size_t>(t) * E]);
  // The rotary angles of this batch's positions, shared by every layer and head.
  positions_.clear();
  for (const Segment& seg : segments_) {
    for (int t = 0; t < seg.n; ++t) positions_.push_back(seg.ctx->n_past_ + t);
  }
  ops_.set_rope_positions(positions_, rope_params());
  if (timed) lap(Profile::kEmbed, 0);

  for (int il = 0; il < c_.n_layer; ++il) {
    const BlockKind kind = c_.blocks[static_cast<size_t>(il)];
    ORK_RETURN_IF_ERROR(kind == BlockKind::kAttention ? attention_block(il, n)
                        : kind == BlockKind::kShortConv ? conv_block(il, n)
                                                        : delta_block(il, n));
    ORK_RETURN_IF_ERROR(ffn_block(il, n));
  }

  // The rows whose logits are wanted, normed into xn_ (free by now).
  int n_out = 0;
  auto norm_row = [&](int row) {
    ops_.rms_norm_rows(&x_[static_cast<size_t>(row) * E], model_.output_norm().data(), 1, E, c_.rms_eps,
                       &xn_[static_cast<size_t>(n_out++) * E]);
  };
  const bool observe_all = observe_every_output_ && observer_ && !all_logits;
  if (all_logits || observe_all) {
    ops_.rms_norm_rows(x_.data(), model_.output_norm().data(), n, E, c_.rms_eps, xn_.data());
    n_out = n;
  } else {
    for (const Segment& seg : segments_) norm_row(seg.row0 + seg.n - 1);
  }
  if (observe_all) {
    // Every row seen, each segment's last computed: those rows moved to
    // the front (a row is normed alone, so the same values as norm_row's).
    observer_(model_.output(), xn_.data(), n);
    n_out = 0;
    for (const Segment& seg : segments_) {
      const auto row = static_cast<size_t>(seg.row0 + seg.n - 1);
      if (row != static_cast<size_t>(n_out)) std::copy_n(&xn_[row * E], E, &xn_[static_cast<size_t>(n_out) * E]);
      ++n_out;
    }
  }
  logits.resize(static_cast<size_t>(n_out) * c_.n_vocab);
  ORK_RETURN_IF_ERROR(observe_all ? dispatch_.matmul(model_.output(), xn_.data(), n_out, logits.data())
                                  : matmul(model_.output(), xn_.data(), n_out, logits.data()));
  for (const Segment& seg : segments_) seg.ctx->advance(seg.n);
  moe_stats_.tokens += static_cast<uint64_t>(n);
  if (timed) lap(Profile::kOutput, matrix_bytes(model_.output()));
  if (profile_) profile_->tokens += static_cast<uint64_t>(n);
  return Status::ok();
}

}  // namespace ork
