// The CPU engine's single matmuls: the SIMD kernels where a weight's type
// has them (integer tiers on int8 activations, float tiers and F32/F16/BF16
// GGUF matrices in f32), the reference kernels otherwise.
#include <algorithm>

#include "core/thread_pool.h"
#include "engines/cpu/cpu_engine.h"
#include "engines/cpu/read_replay.h"
#include "kernels/cpu/float_ops.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/ref/ops.h"

namespace ork {
namespace {

bool integer_tier(const WeightView& w) { return w.is_tier && !float_tier(w.tier); }

}  // namespace

bool CpuEngine::decode_loop(const MatmulJob& job) const {
  return job.op.m == 1 && fast() && integer_tier(job.w) && !job.x_in_basis && job.row_begin == 0 &&
         job.row_end < 0 && job.ldy == job.w.rows;
}

// Pads each token's input to k_stored, rotates it if the weight is rotated,
// and (for the integer kernels) quantizes it per token. Tokens split over
// the pool when there are several. Remembers what it made from what.
void CpuEngine::prepare_activations(const MatmulJob& job, bool quantize) {
  const WeightView& w = job.w;
  const auto n = static_cast<int>(job.op.m);
  const int64_t k = w.k();
  const int64_t cols = job.x_in_basis ? k : w.cols;
  act_src_.assign(job.x, job.x + static_cast<int64_t>(n) * cols);
  act_cols_ = job.x_in_basis ? -1 : w.cols;  // an input already in its basis is never reused
  act_k_ = k;
  act_block_ = w.is_tier && !job.x_in_basis ? w.rotation_block : 0;
  act_seed_ = w.is_tier ? w.rotation_seed : 0;
  act_quantized_ = quantize;
  act_f32_.resize(static_cast<size_t>(n * k));
  if (quantize) {
    act_i8_.resize(static_cast<size_t>(n * k));
    act_scales_.resize(static_cast<size_t>(n));
    act_sums_.resize(static_cast<size_t>(n));
  }
  const float* signs = act_block_ > 0 ? signs_.get(k, act_seed_) : nullptr;
  const int block = act_block_;
  pool_->run(
      n,
      [&](int64_t begin, int64_t end) {
        const auto b = static_cast<size_t>(begin);
        pad_rotate_quantize(job.x + begin * cols, end - begin, cols, k, block, signs, &act_f32_[b * k],
                            quantize ? &act_i8_[b * k] : nullptr, quantize ? &act_scales_[b] : nullptr,
                            quantize ? &act_sums_[b] : nullptr);
      },
      8);
}

bool CpuEngine::matmul_fast(const MatmulJob& job) {
  if (!fast()) return false;
  const WeightView& w = job.w;
  const bool quantized = integer_tier(w);
  const bool plain_tier = w.is_tier && !quantized;
  const bool float_gguf =
      !w.is_tier && (w.type == GgmlType::kF32 || w.type == GgmlType::kF16 || w.type == GgmlType::kBF16);
  if (!quantized && !plain_tier && !float_gguf) return false;
  const auto n = static_cast<int>(job.op.m);
  const int64_t k = w.k();
  // A matmul input is rotated (and quantized) once for every matmul that
  // reads it: q, k and v share one, as do gate and up. The cache is keyed by
  // the input's contents, not its buffer, since buffers are rewritten
  // between layers.
  const size_t src_len = static_cast<size_t>(n) * static_cast<size_t>(w.cols);
  const int block = w.is_tier ? w.rotation_block : 0;
  const uint64_t seed = w.is_tier ? w.rotation_seed : 0;
  // A float matrix stored unpadded and unrotated reads the input as it is
  // (a MoE router: no copies of it to make or compare); so does one whose
  // input arrives in its basis.
  const bool as_is = !quantized && ((k == w.cols && block == 0) || job.x_in_basis);
  const bool cached = as_is || (!job.x_in_basis && act_cols_ == w.cols && act_k_ == k && act_block_ == block &&
                                act_seed_ == seed && (act_quantized_ || !quantized) && act_src_.size() == src_len &&
                                std::equal(act_src_.begin(), act_src_.end(), job.x));
  if (!cached) prepare_activations(job, quantized);
  const float* act = as_is ? job.x : act_f32_.data();
  const int64_t first = job.row_begin, last = job.rows_end();
  // Rows in blocks of 4, split over the pool.
  const int64_t blocks = (last - first + 3) / 4;
  const int64_t min_blocks = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, n * k));
  if (quantized) {
    const QuantWeights qw = quant_weights(w.tier_tensor(), job.i8s_high_only);
    const QuantActs qa{act_i8_.data(), act_scales_.data(), act_sums_.data(), k, n, act_f32_.data()};
    if (record_ != nullptr && n == 1) {
      record_->begin_loop();
      record_->add_rows(qw, first, last);
    }
    // Decode claims shares of rows as the threads free up (a join waits for
    // the slowest thread); prefill keeps one slice per thread, since each
    // call lays the activations out into panels again.
    pool_->run(
        blocks,
        [&](int64_t b, int64_t e) {
          cpu::quant_matmul(qw, qa, job.y, job.ldy, first + 4 * b, std::min(last, first + 4 * e));
        },
        min_blocks, n < 4 ? ThreadPool::Schedule::kShared : ThreadPool::Schedule::kStatic);
    if (record_ != nullptr && n == 1) record_->end_loop();
  } else {
    const bool f16 = plain_tier ? w.tier == Tier::kF16 : w.type == GgmlType::kF16;
    const bool bf16 = plain_tier ? w.tier == Tier::kBf16 : w.type == GgmlType::kBF16;
    const cpu::FloatWeights kind = f16 ? cpu::FloatWeights::kF16 : bf16 ? cpu::FloatWeights::kBf16 : cpu::FloatWeights::kF32;
    if (record_ != nullptr && n == 1) {
      record_->begin_loop();
      record_->add_float_rows(kind, w.data, k, first, last);
    }
    pool_->run(
        blocks,
        [&](int64_t b, int64_t e) {
          cpu::float_matmul(kind, w.data, k, act, n, job.y, job.ldy, first + 4 * b, std::min(last, first + 4 * e));
        },
        min_blocks);
    if (record_ != nullptr && n == 1) record_->end_loop();
  }
  return true;
}

// Output rows are independent: split them over the pool. Each slice runs
// the reference kernel, so results do not depend on the thread count.
void CpuEngine::matmul_reference(const MatmulJob& job) {
  WeightView w = job.w;
  if (job.x_in_basis) {
    // The input is already padded and rotated: read it as it is.
    w.cols = w.k();
    w.rotation_block = 0;
  }
  const auto n = job.op.m;
  const int64_t first = job.row_begin, last = job.rows_end();
  const bool contiguous = job.ldy == w.rows;
  thread_local std::vector<float> staged;
  if (!contiguous) staged.resize(static_cast<size_t>(n * w.rows));
  float* y = contiguous ? job.y : staged.data();
  const int64_t work_per_row = n * w.k();
  pool_->run(
      last - first, [&](int64_t begin, int64_t end) { ref::matmul(w, job.x, n, y, first + begin, first + end); },
      std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, work_per_row)));
  if (!contiguous) {
    for (int64_t t = 0; t < n; ++t) {
      std::copy(&y[t * w.rows + first], &y[t * w.rows + last], &job.y[t * job.ldy + first]);
    }
  }
}

}  // namespace ork
