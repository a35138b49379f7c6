// The forward pass of the llama family, readable top to bottom. Every
// matmul goes to the dispatcher (src/dispatch), which routes it to an
// engine - the CPU's SIMD kernels by default, or its scalar reference
// kernels, the oracle; an NPU where one is set - and the other ops run on
// the CPU engine through the dispatcher's HostOps. A Context owns the KV
// cache (f16 on the fast path, f32 on the reference path) and scratch
// buffers, sized once; evaluation does not allocate beyond the first call
// with a given batch size.
//
// Not thread-safe: one Context per concurrent sequence. The Model must
// outlive its Contexts.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <span>
#include <vector>

#include "core/kv_layout.h"
#include "dispatch/dispatcher.h"
#include "model/model.h"

namespace ork {

class ThreadPool;
class Trace;

class Context {
 public:
  // n_ctx: positions the KV cache holds (0 = the model's trained context).
  // pool: threads that split each matmul's rows (null: the global pool).
  Context(const Model& model, int n_ctx = 0, ThreadPool* pool = nullptr);
  ~Context();

  // Bytes a Context of n_ctx positions allocates: its KV cache (f16 on the
  // fast path, f32 on the reference path) and its scratch for batches of up
  // to n_batch tokens. What a caller checks against the memory available
  // before it makes one.
  static uint64_t memory_bytes(const ModelConfig& c, int n_ctx, int n_batch, bool fast_kernels = true,
                               KvTypes kv_types = {});
  // Bytes one position of the KV cache takes, every layer's K and V.
  static uint64_t kv_bytes_per_position(const ModelConfig& c, bool fast_kernels = true, KvTypes kv_types = {});
  // Bytes of recurrent state a decoded token reads and writes: each
  // DeltaNet's state matrices (read and written) and convolution inputs,
  // each short convolution's inputs. Decode's share beside weights and KV.
  static uint64_t recurrent_bytes_per_token(const ModelConfig& c);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Evaluates `tokens` at positions n_past()..n_past()+n-1 as one batch and
  // appends them to the cache. Returns the logits of the last token (n_vocab
  // floats), or of every token when `all_logits` is set (n x n_vocab).
  // Fails with kResourceExhausted when the cache or scratch cannot be
  // allocated, and with kNumerical when a logit is NaN or infinite (broken
  // weights): the cache then holds the batch, which the caller may truncate.
  Result<std::vector<float>> eval(std::span<const int32_t> tokens, bool all_logits = false);
  // The same into `logits`, resized to fit: a decode loop that passes one
  // vector every time reuses its storage (a fresh 128 KB vector per token
  // cost about 50 us in page faults here, as malloc hands freed memory
  // back to the system and takes it again).
  Status eval(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits = false);
  // The same (the last token's logits), with the observer (set_observer)
  // shown every token's input to the output matrix, as all_logits would
  // show it, without the other tokens' logits being computed: how an
  // importance matrix sees the output matrix, at 1/n of its cost.
  Status eval_observing_every_output(std::span<const int32_t> tokens, std::vector<float>& logits);

  // Several Contexts of one model evaluated as one batch (continuous
  // batching): contexts[i] takes tokens[i] at its own positions; their rows
  // go through every matmul together, so the weights stream once for all,
  // and attention runs over each one's own cache. `logits` gets each
  // context's last token's scores, n_vocab floats per context in order.
  // The first context's dispatcher, scratch and statistics serve the
  // batch. All must share the model and the kernels (fast or reference),
  // each context at most once; nothing is evaluated when one cannot take
  // its tokens.
  static Status eval_together(std::span<Context* const> contexts, std::span<const std::span<const int32_t>> tokens,
                              std::vector<float>& logits);

  // On (default): the SIMD kernels. Quantized orkpack tiers run integer
  // matmuls on int8 activations (rotated, then quantized per token); f16/f32
  // tiers and F32/F16 GGUF matrices a float matmul; other GGUF types the
  // reference matmul. Attention reads an f16 KV cache.
  // Off: every op runs the scalar reference with an f32 KV cache.
  // Changing it empties the cache.
  void set_fast_kernels(bool on);
  bool fast_kernels() const { return dispatch_.fast_kernels(); }

  // The fast path's KV cache element types, llama.cpp's --cache-type-k/-v:
  // f16 (default), or q8_0 - int8 codes and a scale per 32 values, about
  // half the bytes a decoded token reads at depth, its attention scores on
  // the integer dot products (core/kv_layout.h, kernels/cpu/kv_attention.h).
  // q8_0 needs a head_dim divisible by 32, and q8_0 values need q8_0 keys.
  // The reference path keeps its f32 cache whatever is set. Changing them
  // empties the cache.
  Status set_kv_types(KvTypes types);
  KvTypes kv_types() const { return kv_types_; }
  static Status check_kv_types(const ModelConfig& c, KvTypes types);

  // Decoding, read i8s tensors' high plane alone (i4 bytes and speed, i4
  // accuracy) instead of both planes (int8 codes): what the CPU does with
  // an NPU. Batches read both planes.
  void set_i8s_high_only(bool on) { dispatch_.set_i8s_high_only(on); }
  // While set, the weight bytes decode's parallel loops read are added to
  // `record`, loop by loop (engines/cpu/read_replay.h; null: off).
  void set_read_record(ReadRecord* record) { dispatch_.set_read_record(record); }

  // An NPU for the dispatcher to route to (null: CPU only), and how. The
  // KV cache is pinned in the engine's address window. The engine must
  // outlive the Context or be unset first.
  void set_npu(Engine* engine, const DispatchOptions& options = {});
  // Every routing decision since the Context was made (or reset).
  const DispatchStats& dispatch_stats() const { return dispatch_.stats(); }
  void reset_dispatch_stats() { dispatch_.reset_stats(); }
  // The CPU's phases (and the dispatcher's decisions) go to this trace.
  void set_trace(Trace* trace);

  // Called with every matmul's weight and input (n_tokens x cols floats)
  // before it runs: how importance matrices are collected.
  using MatmulObserver = std::function<void(const WeightView& w, const float* x, int n_tokens)>;
  void set_observer(MatmulObserver observer) { observer_ = std::move(observer); }

  // Mixture-of-experts accounting since the Context was made: how often
  // each layer routed to each expert, and the expert weight bytes read.
  struct MoeStats {
    int n_layer = 0, n_expert = 0;
    std::vector<uint64_t> hits;  // [layer * n_expert + expert]: token-expert pairs
    uint64_t tokens = 0;         // tokens evaluated
    uint64_t expert_bytes = 0;   // expert matrix bytes read (each active expert once per batch)
    uint64_t fused_layers = 0;   // layer steps decoded with the experts' matmuls fused
    uint64_t fused_prefill_layers = 0;  // layer steps of a batch with the experts split over threads
  };
  const MoeStats& moe_stats() const { return moe_stats_; }

  // Where evaluation's time goes, phase by phase of the forward pass: wall
  // time, the part of it inside the pool's loops (the rest: serial work on
  // one thread while the others waited or were not needed), and the weight
  // and KV-cache bytes each phase read. Made for decode (`ork bench
  // --profile`); in a batch every expert counts under kExpertsDown.
  struct Profile {
    enum Phase {
      kEmbed,          // embedding row, rotary tables
      kQkv,            // attention norm, q/k/v input, the q/k/v loop (QK-norm, RoPE, KV stores inside)
      kAttention,      // scores and values over the KV cache
      kO,              // the o input, the o loop, the residual
      kConv,           // a short-convolution layer: norm, in_proj, the convolution, out_proj, the residual
      kDeltaIn,        // a gated DeltaNet layer's norm and its qkv / gate / beta / alpha projections
      kDeltaState,     // its gates, convolution and delta rule (bytes: the recurrent state read and written)
      kDeltaOut,       // its output norm and gate, out_proj, the residual
      kRouter,         // ffn norm, the router, top-k
      kExpertsGateUp,  // the routed experts' inputs, the gate/up loop (down inputs inside)
      kExpertsDown,    // the down loop (the weighted sum inside), the residual
      kSharedExpert,   // qwen2moe's shared expert
      kFfnGateUp,      // dense: ffn norm, the gate/up input and loop
      kFfnDown,        // dense: SwiGLU, the down input and loop, the residual
      kOutput,         // output norm, the output loop
      kPhases
    };
    struct Entry {
      double seconds = 0, loop_seconds = 0;
      uint64_t bytes = 0;
    };
    std::array<Entry, kPhases> phases{};
    uint64_t tokens = 0;
    static const char* name(Phase phase);
  };
  // Null (default): not profiled. Else every eval adds to *profile, and
  // the pool times its loops while one is set.
  void set_profile(Profile* profile);

  int n_past() const { return n_past_; }
  int n_ctx() const { return n_ctx_; }
  // The KV cache's first n_past() positions (and `tokens`, what they hold)
  // to a file, written safely; and back into a Context of the same model
  // and kernels, whose n_past() it sets. Errors name the file and what
  // does not match.
  Status save_state(const std::string& path, std::span<const int32_t> tokens) const;
  Result<std::vector<int32_t>> load_state(const std::string& path);
  // Forgets the cache from position `pos` on (0 = everything) and returns
  // the position kept: `pos`, or less when the recurrent state cannot be
  // had there - 0 when a short convolution no longer holds the inputs it
  // needs at `pos` (it keeps the last conv_window() of them); for a DeltaNet,
  // whose state cannot be rewound, the end of the last batch of two or more
  // tokens if that is at or before `pos` (its state is kept from then: a
  // chat's prompt, so the next turn re-evaluates the reply and no more),
  // else 0. The caller evaluates from there.
  int truncate(int pos);
  // Past inputs each short-convolution layer keeps: its kernel's, and a
  // margin for truncating to a slightly earlier position (a re-rendered
  // chat turn).
  static size_t conv_window(const ModelConfig& c) { return c.n_conv_layers > 0 ? static_cast<size_t>(c.conv_kernel - 1 + 64) : 0; }
  size_t conv_window() const { return conv_window(c_); }

 private:
  // A batch's rows [row0, row0 + n) belong to `ctx` (this one, or another
  // of eval_together), at its positions n_past.. .
  struct Segment {
    Context* ctx;
    int row0, n;
  };
  Status check_batch(std::span<const int32_t> tokens) const;
  Status eval_batch(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits);
  Status eval_checked(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits);
  Status attention_block(int layer, int n);
  Status conv_block(int layer, int n);
  Status delta_block(int layer, int n);
  void advance(int n);
  Status ffn_block(int layer, int n);
  Status moe_ffn(int layer, int n);
  void store_kv(int layer, int n_tokens, bool values);
  void finish_projection(int layer, int n_tokens, int which);
  void attention(int layer, int n_tokens);
  RopeParams rope_params() const;
  // Every matmul goes through these: the observer sees it, then the dispatcher.
  Status matmul(const WeightView& w, const float* x, int n, float* y);
  Status matmul_shared(std::initializer_list<Dispatcher::Output> outs, const float* x, int n,
                       const std::function<void(int)>& done = nullptr);
  void pin_kv_cache();
  void resize_scratch(int n_tokens);
  // Profile: the time since the last lap (and the pool's loop time in it)
  // goes to `phase`, with `bytes` read.
  void lap(Profile::Phase phase, uint64_t bytes);
  void lap_start();

  const Model& model_;
  const ModelConfig& c_;
  int n_ctx_;
  ThreadPool* pool_;
  Dispatcher dispatch_;
  HostOps& ops_;
  int n_past_ = 0;
  std::vector<Segment> segments_;     // of the batch being evaluated
  std::vector<int32_t> positions_;    // its tokens' positions
  MatmulObserver observer_;
  bool observe_every_output_ = false;  // eval_observing_every_output's, for eval_batch
  // The reference path's f32 cache: [layer][pos][kv_dim].
  std::vector<float> k_cache_, v_cache_;
  // The fast path's f16 cache: [layer][kv head][pos][head_dim], so one KV
  // head's positions are contiguous for attention.
  std::vector<uint16_t> k_cache16_, v_cache16_;
  // Or of q8_0 (kv_types_): codes and scales, each [layer][kv head] of a
  // KvQ8Layout of n_ctx positions.
  KvTypes kv_types_;
  std::vector<int8_t> k_codes8_, v_codes8_;
  std::vector<float> k_scales8_, v_scales8_;
  // Short convolutions (lfm2): each layer's last conv_window() inputs u,
  // [conv layer][position % window][n_embd], the lowest position still
  // held, and the batch's B, C, X, u and output rows.
  std::vector<float> conv_ring_;
  int conv_lowest_ = 0;
  std::vector<float> bcx_, conv_u_, conv_y_, conv_history_;
  // Gated DeltaNets (qwen35): each layer's state matrices and last
  // ssm_conv_kernel - 1 inputs of its convolution (zero before position
  // 0), [delta layer][...]; the batch's projections, gates and outputs.
  std::vector<float> delta_state_, delta_conv_;
  // Their copy at the end of the last batch of two or more tokens, at
  // position delta_mark_pos_ (-1: none), which truncate can go back to.
  std::vector<float> delta_mark_state_, delta_mark_conv_;
  int delta_mark_pos_ = -1;
  std::vector<float> dqkv_, dconv_, dz_, dbeta_, dalpha_, ddecay_, dout_;
  // Gated attention (qwen35): each head's output gate.
  std::vector<float> attn_gate_;

  MoeStats moe_stats_;
  Profile* profile_ = nullptr;
  Trace* trace_ = nullptr;
  int trace_track_ = 0;
  double lap_seconds_ = 0, lap_loop_seconds_ = 0;
  std::vector<float> router_logits_, route_w_, moe_in_, moe_gate_, moe_up_, moe_out_, moe_acc_;
  std::vector<int32_t> route_ids_, moe_tokens_;
  std::vector<float> moe_weights_;
  // With an expert cache (Model::expert_cache): the routed experts' views
  // as the cache lends them, the layer's active experts, and the next MoE
  // layer's predicted ones.
  std::vector<WeightView> exp_gate_, exp_up_, exp_down_;
  std::vector<int32_t> active_, group_, pred_ids_;
  std::vector<float> pred_logits_, pred_w_;
  // Routes, the experts' matrices and the output of the routed experts of
  // one layer: through the dispatcher's fused paths when it takes them,
  // else one expert at a time over the experts `which` (ascending; null:
  // every active one).
  // `arriving`, when set: the fused decode awaits each expert's weights
  // (ExpertsCall::present, ::await), and the loop awaits them all first.
  struct Arriving {
    std::function<bool(int)> present;
    std::function<void(int)> await;
    std::function<Status()> await_all;
  };
  Status run_experts(int n, const std::vector<WeightView>& gate, const std::vector<WeightView>& up,
                     const std::vector<WeightView>& down, bool may_fuse, const std::vector<int32_t>* which,
                     uint64_t gate_up_bytes, uint64_t down_bytes, bool* fused, const Arriving* arriving = nullptr);
  // The experts of `layer` through the expert cache, in groups that fit it.
  Status cached_experts(int layer, int n, uint64_t gate_up_bytes, uint64_t down_bytes, bool* fused);
  // Starts reading the experts the next MoE layer after `layer` is
  // predicted to route the token to: its router on this layer's input.
  void prefetch_next_layer(int layer);

  // Scratch, [n_tokens][width].
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_;
};

}  // namespace ork
