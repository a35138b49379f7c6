// The reference forward pass of the llama family, readable top to bottom,
// on the scalar kernels in src/kernels/ref. A Context owns the KV cache
// (f32) and scratch buffers, sized once; evaluation does not allocate
// beyond the first call with a given batch size.
//
// Not thread-safe: one Context per concurrent sequence. The Model must
// outlive its Contexts.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/model.h"

namespace ork {

class ThreadPool;

class Context {
 public:
  // n_ctx: positions the KV cache holds (0 = the model's trained context).
  // pool: threads that split each matmul's rows (null: the global pool).
  Context(const Model& model, int n_ctx = 0, ThreadPool* pool = nullptr);

  // Evaluates `tokens` at positions n_past()..n_past()+n-1 as one batch and
  // appends them to the cache. Returns the logits of the last token (n_vocab
  // floats), or of every token when `all_logits` is set (n x n_vocab).
  Result<std::vector<float>> eval(std::span<const int32_t> tokens, bool all_logits = false);

  // Off: every matmul runs the scalar reference (the oracle). On (default):
  // i4 and i8 orkpack weights run the SIMD integer kernels on int8
  // activations (quantized per token, after the rotation).
  void set_fast_kernels(bool on) { fast_kernels_ = on; }

  // Called with every matmul's weight and input (n_tokens x cols floats)
  // before it runs: how importance matrices are collected.
  using MatmulObserver = std::function<void(const ref::WeightView& w, const float* x, int n_tokens)>;
  void set_observer(MatmulObserver observer) { observer_ = std::move(observer); }

  int n_past() const { return n_past_; }
  int n_ctx() const { return n_ctx_; }
  // Forgets the cache from position `pos` on (0 = everything).
  void truncate(int pos) { n_past_ = pos < n_past_ ? pos : n_past_; }

 private:
  void attention(int layer, int n_tokens);
  void matmul(const ref::WeightView& w, const float* x, int n, float* y);
  bool matmul_fast(const ref::WeightView& w, const float* x, int n, float* y);
  void prepare_activations(const ref::WeightView& w, const float* x, int n);
  void resize_scratch(int n_tokens);

  const Model& model_;
  const ModelConfig& c_;
  int n_ctx_;
  ThreadPool* pool_;
  int n_past_ = 0;
  MatmulObserver observer_;
  bool fast_kernels_ = true;
  std::vector<float> act_f32_;
  std::vector<int8_t> act_i8_;
  std::vector<float> act_scales_;
  // What act_i8_ holds: the raw input it was made from and how.
  std::vector<float> act_src_;
  int64_t act_cols_ = -1, act_k_ = -1;
  int act_block_ = -1;
  uint64_t act_seed_ = 0;
  std::vector<float> k_cache_;  // [layer][pos][kv_dim]
  std::vector<float> v_cache_;

  // Scratch, [n_tokens][width].
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, scores_;
};

}  // namespace ork
