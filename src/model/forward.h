// The forward pass of the llama family, readable top to bottom. It runs on
// the CPU engine's SIMD kernels (src/kernels/cpu) by default, or on the
// scalar reference kernels (src/kernels/ref), the oracle. A Context owns the
// KV cache (f16 on the fast path, f32 on the reference path) and scratch
// buffers, sized once; evaluation does not allocate beyond the first call
// with a given batch size.
//
// Not thread-safe: one Context per concurrent sequence. The Model must
// outlive its Contexts.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <span>
#include <vector>

#include "kernels/quant_types.h"
#include "model/model.h"

namespace ork {

class ThreadPool;
class Engine;
namespace npu {
class NpuEngine;
}

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
  static uint64_t memory_bytes(const ModelConfig& c, int n_ctx, int n_batch, bool fast_kernels = true);
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

  // On (default): the SIMD kernels. Quantized orkpack tiers run integer
  // matmuls on int8 activations (rotated, then quantized per token); f16/f32
  // tiers and F32/F16 GGUF matrices a float matmul; other GGUF types the
  // reference matmul. Attention reads an f16 KV cache.
  // Off: every op runs the scalar reference with an f32 KV cache.
  // Changing it empties the cache.
  void set_fast_kernels(bool on);
  bool fast_kernels() const { return fast_kernels_; }

  // Fast path only: read i8s tensors' high plane alone (i4 bytes and speed,
  // i4 accuracy) instead of both planes (int8 codes). Default off.
  void set_i8s_high_only(bool on) { i8s_high_only_ = on; }

  // Static NPU placement until the dispatcher exists: every matmul over
  // more than one token (prefill) whose tier the engine supports runs on
  // it; decode stays on the CPU. The KV cache is pinned in the engine's
  // address window. Null: CPU only. The engine must outlive the Context.
  void set_npu(npu::NpuEngine* engine);
  struct NpuStats {
    uint64_t matmuls = 0;           // run on the NPU
    uint64_t refused = 0;           // M > 1 but not supported there (ran on the CPU)
    uint64_t failed = 0;            // submitted, but the device reported an error (ran on the CPU)
  };
  const NpuStats& npu_stats() const { return npu_stats_; }

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
  // time, the part of it inside the pool's parallel loops (the rest ran on
  // one thread while the others waited or were not needed), and the weight
  // and KV-cache bytes each phase read. Made for decode (`ork bench
  // --profile`); in a batch every expert counts under kExpertsDown.
  struct Profile {
    enum Phase {
      kEmbed,          // embedding row, rotary tables
      kQkv,            // attention norm, q/k/v input, the q/k/v loop (QK-norm, RoPE, KV stores inside)
      kAttention,      // scores and values over the KV cache
      kO,              // the o input, the o loop, the residual
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
  // Forgets the cache from position `pos` on (0 = everything).
  void truncate(int pos) { n_past_ = pos < n_past_ ? pos : n_past_; }

 private:
  Status eval_batch(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits);
  void embed(int32_t token, float* out);
  void attention(int layer, int n_tokens);
  void moe_ffn(int layer, int n_tokens);
  bool moe_decode_fused(int layer);
  bool moe_prefill_fused(int layer, int n_tokens);
  // One token's activations quantized for one stored basis.
  struct QuantInput {
    int64_t k = 0;
    int block = 0;
    uint64_t seed = 0;
    const float* signs = nullptr;  // the rotation's (null: not rotated)
    std::vector<float> row;        // the padded, rotated input
    std::vector<int8_t> codes;
    float scale = 0;
    int32_t sum = 0;
    // Whether this is the basis w is stored in (k, rotation).
    bool in_basis_of(const WeightView& w) const {
      return k == w.k_stored && block == w.rotation_block && seed == w.rotation_seed;
    }
  };
  // Quantized inputs of one source vector, one per stored basis. Slots are
  // reused from call to call (reset() forgets them, keeping their buffers)
  // and never move, so jobs may point at them.
  struct QuantInputs {
    std::deque<QuantInput> slots;
    size_t used = 0;
    void reset() { used = 0; }
  };
  // The slot of `cache` for w's stored basis, its buffers sized; `fresh`
  // when it was not there yet (its codes are then to be filled).
  QuantInput& input_slot(const WeightView& w, QuantInputs& cache, bool* fresh);
  // Makes q's basis w's and sizes its buffers (its codes are then stale).
  void set_basis(const WeightView& w, QuantInput& q);
  // Pads, rotates and quantizes one input of `cols` values into q's basis.
  // Touches only q, so threads may fill different slots at once.
  static void fill_input(const float* x, int64_t cols, QuantInput& q);
  const QuantInput& quantize_input(const WeightView& w, const float* x, QuantInputs& cache);
  struct QuantJob {
    QuantWeights w;
    const QuantInput* in;
    float* y;
  };
  // Jobs in groups of `group_size` consecutive ones (0: no groups): the
  // thread that finishes a group's last rows calls group_done(group), with
  // every row of the group visible to it.
  void matmuls_together(std::span<const QuantJob> jobs, int group_size = 0,
                        const std::function<void(int group)>& group_done = nullptr);
  void matmul_shared_input(std::initializer_list<std::pair<const WeightView*, float*>> outs, const float* x, int n,
                           const std::function<void(int)>& done = nullptr);
  void store_kv(int layer, int n_tokens, bool values);
  void finish_projection(int layer, int n_tokens, int which);
  void rms_norm_rows(const float* x, const float* weight, int n, int width, float* out);
  // out = silu(gate) * up over n values, on the engine's kernels.
  void swiglu(const float* gate, const float* up, int64_t n, float* out);
  // Whether a matmul of w over n tokens runs in decode's parallel loops
  // over quantized inputs (matmuls_together).
  bool decode_loop(const WeightView& w, int n) const;
  void rope_rows(float* x, int n, int n_heads, const float* norm);
  RopeParams rope_params() const;
  void matmul(const WeightView& w, const float* x, int n, float* y);
  bool matmul_fast(const WeightView& w, const float* x, int n, float* y);
  bool matmul_npu(const WeightView& w, const float* x, int n, float* y);
  void pin_kv_cache();
  void prepare_activations(const WeightView& w, const float* x, int n, bool quantize);
  const float* rotation_signs(int64_t k, uint64_t seed);
  void resize_scratch(int n_tokens);
  // Profile: the time since the last lap (and the pool's loop time in it)
  // goes to `phase`, with `bytes` read.
  void lap(Profile::Phase phase, uint64_t bytes);
  void lap_start();

  const Model& model_;
  const ModelConfig& c_;
  int n_ctx_;
  ThreadPool* pool_;
  int n_past_ = 0;
  MatmulObserver observer_;
  bool fast_kernels_ = true;
  bool i8s_high_only_ = false;
  std::vector<float> act_f32_;
  std::vector<int8_t> act_i8_;
  std::vector<float> act_scales_;
  std::vector<int32_t> act_sums_;
  // What act_i8_ holds: the raw input it was made from and how.
  std::vector<float> act_src_;
  int64_t act_cols_ = -1, act_k_ = -1;
  int act_block_ = -1;
  uint64_t act_seed_ = 0;
  bool act_quantized_ = false;
  struct SignTable {
    int64_t k = 0;
    uint64_t seed = 0;
    std::vector<float> signs;
  };
  std::deque<SignTable> signs_;  // the rotation's signs per (k, seed); stable addresses
  // The reference path's f32 cache: [layer][pos][kv_dim].
  std::vector<float> k_cache_, v_cache_;
  // The fast path's f16 cache: [layer][kv head][pos][head_dim], so one KV
  // head's positions are contiguous for attention.
  std::vector<uint16_t> k_cache16_, v_cache16_;
  std::vector<float> rope_cos_, rope_sin_;  // [token][n_rot / 2] of this batch

  MoeStats moe_stats_;
  Profile* profile_ = nullptr;
  double lap_seconds_ = 0, lap_loop_seconds_ = 0;
  npu::NpuEngine* npu_ = nullptr;
  NpuStats npu_stats_;
  std::vector<const void*> npu_pinned_;
  std::vector<float> router_logits_, route_w_, moe_in_, moe_gate_, moe_up_, moe_out_, moe_acc_;
  std::vector<int32_t> route_ids_, moe_tokens_;
  std::vector<float> quant_row_;  // embed's scratch
  // Decode's fused loops, kept so that a token does not allocate: the
  // shared input and each routed expert's down input, the jobs, the loop's
  // block offsets, the experts' summation order.
  QuantInputs shared_in_;
  std::vector<QuantInput> down_in_;  // by position in id order
  std::vector<QuantJob> jobs_, down_jobs_;
  std::vector<int64_t> first_block_;
  std::vector<std::atomic<int64_t>> group_rows_left_;
  // Decode's running sum of the routed experts' outputs: which positions
  // (in id order) are done, the next to add, and whether a thread is adding.
  std::vector<std::atomic<bool>> sum_ready_;
  std::atomic<int> sum_next_{0};
  std::atomic<bool> summing_{false};
  std::vector<int> expert_order_;
  std::vector<float> moe_weights_;
  // Batched experts: each expert's first entry in moe_tokens_ (by expert).
  std::vector<int> moe_begin_;

  // Scratch, [n_tokens][width].
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, scores_;
};

}  // namespace ork
