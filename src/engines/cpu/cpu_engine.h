// The CPU engine: every matmul ork runs on the CPU, behind the engine
// contract, on the Highway kernels (src/kernels/cpu) or the scalar
// reference (src/kernels/ref, the oracle), split over the thread pool; and
// the host ops (norms, RoPE, attention, ...) of the forward pass.
//
// What makes decode fast lives here (docs/BENCHMARKS.md): an input is
// rotated and quantized once for every matmul that reads it; the matmuls of
// one token that share an input run as one parallel loop with the
// follow-up work of each group done in the loop by the thread that
// finished it; a token's routed experts run as two such loops, and a
// batch's experts each whole on one thread. Jobs run inside submit(): the
// fence it returns is already signalled.
//
// One CpuEngine per sequence (Context): it keeps per-sequence scratch.
// Not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "engines/activations.h"
#include "engines/engine.h"
#include "engines/host_ops.h"
#include "kernels/quant_types.h"

namespace ork {

class ReadRecord;
class ThreadPool;

// A batch of tokens through their routed experts (one MoE layer): every
// active expert runs over its tokens (gate, up, SwiGLU, down) and each
// token's outputs are summed with its routing weights, in the order of the
// experts' ids.
struct ExpertsJob {
  std::span<const WeightView> gate, up, down;  // per expert
  const int32_t* ids = nullptr;                // n x k routed experts
  const float* weights = nullptr;              // n x k routing weights
  int n = 0, k = 0;
  int64_t n_embd = 0, n_ff = 0;
  const float* x = nullptr;                    // n x n_embd
  float* acc = nullptr;                        // n x n_embd, zero on entry; gets the weighted sum
  bool i8s_high_only = false;
  // Decode (n = 1) only, each optional. The positions p are the routed
  // slots in the order of their experts' ids. after_gate_up(down_inputs,
  // down_quantized, down_outputs) on the calling thread once the first loop
  // is done, while the other threads start on the downs (any down may be
  // done, and its before_sum called, before it returns; with
  // after_gate_up_first, before they start), with the down inputs (k rows of
  // n_ff, by position), the same quantized in each down's stored basis as
  // the down loop reads them (k, by position; valid during the call), and
  // where the down loop will write its outputs (k rows of n_embd, by
  // position; each may be written over in before_sum); on the
  // pool's threads, before_swiglu(p, gate, up) when expert p's gate and up
  // rows are written, before they are consumed, and before_sum(p, out) when
  // its down rows are, before they are added.
  std::function<void(const float* down_inputs, const QuantizedToken* down_quantized, float* down_outputs)> after_gate_up;
  bool after_gate_up_first = false;
  std::function<void(int p, float* gate, float* up)> before_swiglu;
  std::function<void(int p, float* out)> before_sum;
  // Decode, optional: weights that are still arriving (an expert cache's
  // reads). present(e) says whether expert e's bytes are in; await(e)
  // blocks until they are, before any thread reads them. The experts
  // present go first, so that the threads compute them while the rest
  // arrive; the results and their sum are the same in any order.
  std::function<bool(int expert)> present;
  std::function<void(int expert)> await;
};

class CpuEngine final : public Engine, public HostOps {
 public:
  enum class Kernels { kReference, kFast };
  explicit CpuEngine(Kernels kernels, ThreadPool* pool = nullptr);

  std::string name() const override { return kernels_ == Kernels::kFast ? "cpu" : "cpu-ref"; }
  // Every matmul: the SIMD kernels for orkpack tiers and F32/F16/BF16
  // GGUF matrices, the reference for the rest (block-quantized GGUF types).
  Support supports(const MatmulOp& op) const override;
  // The CPU kernels need no per-shape program: this only checks supports().
  Status prepare(const MatmulOp& op) override;
  Result<FencePtr> submit(const MatmulJob& job) override;
  // One token's matmuls of one input (all integer tiers, fast kernels) as
  // one parallel loop; anything else each job in turn.
  Result<FencePtr> submit(const MatmulBatch& batch) override;

  // Whether run_experts takes the fused paths for these experts (fast
  // kernels, every active expert an integer tier).
  bool fused_experts(const ExpertsJob& job) const;
  // The fused expert loops (fused_experts must hold).
  void run_experts(const ExpertsJob& job);

  void set_kernels(Kernels k);
  Kernels kernels() const { return kernels_; }
  ThreadPool& pool() const { return *pool_; }
  // While set, decode's parallel loops (one token's matmuls on the fast
  // kernels) add the weight bytes each reads to `record` (null: off).
  void set_read_record(ReadRecord* record) { record_ = record; }

  // HostOps
  bool fast() const override { return kernels_ == Kernels::kFast; }
  void rms_norm_rows(const float* x, const float* weight, int n, int width, float eps, float* out) override;
  void swiglu(const float* gate, const float* up, int64_t n, float* out) override;
  void set_rope_positions(std::span<const int32_t> positions, const RopeParams& p) override;
  void rope_rows(float* x, int n, int n_heads, int head_dim, const float* norm, float eps,
                 const RopeParams& p) override;
  void to_f16(const float* x, int64_t n, uint16_t* out) override;
  void store_kv_q8(const float* x, int head_dim, int64_t pos, bool key, int8_t* codes, float* scales) override;
  void attention(const AttentionArgs& a) override;
  void short_conv(const float* bcx, int n, int width, const float* w, int taps, const float* history, float* u,
                  float* out) override;
  void conv_silu(const float* x, int n, int width, const float* w, int taps, const float* history,
                 float* out) override;
  // The v-heads split over the pool (each head's recurrence is its own).
  void delta_net(const DeltaNetArgs& a) override;
  void embed(const WeightView& w, int32_t token, float* out) override;

 private:
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
  struct QuantJob {
    QuantWeights w;
    const QuantInput* in;
    float* y;
  };

  // Single matmuls (matmul.cc).
  bool matmul_fast(const MatmulJob& job);
  void matmul_reference(const MatmulJob& job);
  void prepare_activations(const MatmulJob& job, bool quantize);
  // Whether a matmul runs in decode's parallel loops over quantized inputs.
  bool decode_loop(const MatmulJob& job) const;

  // Decode's loops (batch.cc).
  QuantInput& input_slot(const WeightView& w, QuantInputs& cache, bool* fresh);
  void set_basis(const WeightView& w, QuantInput& q);
  static void fill_input(const float* x, int64_t cols, QuantInput& q);
  const QuantInput& quantize_input(const WeightView& w, const float* x, QuantInputs& cache);
  // Jobs in groups of `group_size` consecutive ones (0: no groups): the
  // thread that finishes a group's last rows calls group_done(group), with
  // every row of the group visible to it.
  // before_job(i), when given, runs on a thread before it reads job i's
  // weights (each time it enters them). lead(), when given, runs on the
  // calling thread while the others start on the rows (ThreadPool::run).
  void matmuls_together(std::span<const QuantJob> jobs, int group_size = 0,
                        const std::function<void(int group)>& group_done = nullptr,
                        const std::function<void(int job)>& before_job = nullptr,
                        const std::function<void()>& lead = nullptr);

  // The routed experts (experts.cc).
  void experts_decode(const ExpertsJob& job);
  void experts_prefill(const ExpertsJob& job);

  Kernels kernels_;
  ThreadPool* pool_;
  ReadRecord* record_ = nullptr;
  RotationSigns signs_;

  // What act_i8_ holds: the raw input it was made from and how.
  std::vector<float> act_f32_;
  std::vector<int8_t> act_i8_;
  std::vector<float> act_scales_;
  std::vector<int32_t> act_sums_;
  std::vector<float> act_src_;
  int64_t act_cols_ = -1, act_k_ = -1;
  int act_block_ = -1;
  uint64_t act_seed_ = 0;
  bool act_quantized_ = false;

  // Decode's fused loops, kept so that a token does not allocate: the
  // shared input and each routed expert's down input, the jobs, the loop's
  // block offsets, the experts' summation order.
  QuantInputs shared_in_;
  std::vector<QuantInput> down_in_;  // by position in id order
  std::vector<QuantJob> jobs_, down_jobs_;
  std::vector<QuantizedToken> down_quantized_;
  std::vector<int64_t> first_block_;
  std::vector<std::atomic<int64_t>> group_rows_left_;
  // Decode's running sum of the routed experts' outputs: which positions
  // (in id order) are done, the next to add, and whether a thread is adding.
  std::vector<std::atomic<bool>> sum_ready_;
  std::atomic<int> sum_next_{0};
  std::atomic<bool> summing_{false};
  std::vector<int> expert_order_, compute_order_;
  std::vector<char> expert_present_;
  std::vector<float> moe_gate_, moe_up_, moe_out_;
  // Batched experts: each expert's first entry in routes_ (by expert).
  std::vector<int> moe_begin_;
  std::vector<int32_t> routes_;

  std::vector<float> quant_row_;            // embed's scratch
  std::vector<float> rope_cos_, rope_sin_;  // [token][n_rot / 2] of this batch
  std::vector<int32_t> rope_positions_;  // of this batch's tokens
};

}  // namespace ork
