// Decode's parallel loops: the matmuls of one token that share an input run
// as one loop over all their rows, one join instead of one per matrix, with
// each group's follow-up work done inside the loop by the thread that
// finished the group.
#include <algorithm>

#include "core/thread_pool.h"
#include "engines/cpu/cpu_engine.h"
#include "engines/cpu/read_replay.h"
#include "kernels/cpu/quant_matmul.h"

namespace ork {

CpuEngine::QuantInput& CpuEngine::input_slot(const WeightView& w, QuantInputs& cache, bool* fresh) {
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
void CpuEngine::set_basis(const WeightView& w, QuantInput& q) {
  if (q.in_basis_of(w) && !q.codes.empty()) return;
  q.k = w.k_stored;
  q.block = w.rotation_block;
  q.seed = w.rotation_seed;
  q.signs = q.block > 0 ? signs_.get(q.k, q.seed) : nullptr;
  q.row.resize(static_cast<size_t>(q.k));
  q.codes.resize(static_cast<size_t>(q.k));
}

void CpuEngine::fill_input(const float* x, int64_t cols, QuantInput& q) {
  pad_rotate_quantize(x, 1, cols, q.k, q.block, q.signs, q.row.data(), q.codes.data(), &q.scale, &q.sum);
}

// Quantized activations of one input for one stored basis (k, rotation).
const CpuEngine::QuantInput& CpuEngine::quantize_input(const WeightView& w, const float* x, QuantInputs& cache) {
  bool fresh = false;
  QuantInput& q = input_slot(w, cache, &fresh);
  if (fresh) fill_input(x, w.cols, q);
  return q;
}

// Runs matmuls of one token as one parallel loop: the rows of all of them,
// in blocks of 4, split over the pool in one go, so the threads stream one
// weight after another without a join per matrix.
void CpuEngine::matmuls_together(std::span<const QuantJob> jobs, int group_size,
                                 const std::function<void(int group)>& group_done,
                                 const std::function<void(int job)>& before_job,
                                 const std::function<void()>& lead) {
  if (record_ != nullptr) {
    record_->begin_loop();
    for (const QuantJob& j : jobs) record_->add_rows(j.w, 0, j.w.rows);
  }
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
      if (before_job) before_job(static_cast<int>(i));
      cpu::quant_matmul(j.w, {j.in->codes.data(), &j.in->scale, &j.in->sum, j.in->k, 1, j.in->row.data()}, j.y, j.w.rows,
                        r0, r1);
      // acq_rel: the thread that counts a group down to zero sees the rows
      // every other thread wrote for it.
      if (grouped && group_rows_left_[i / per_group].fetch_sub(r1 - r0, std::memory_order_acq_rel) == r1 - r0) {
        group_done(static_cast<int>(i / per_group));
      }
      b = end;
    }
  };
  // Shares of at least 8 blocks (32 rows), claimed as the threads free up,
  // each a whole share of what is left (kGuided), so a thread reads a few
  // long runs of rows. Against claims of a quarter of what is left (kShared):
  // llama-1b i4, two threads, Zen 5, `ork bench -p 0 -n 64 -r 3`, four
  // alternating rounds (session 42): 117.4 -> 123.4 tok/s (medians), 78-83 %
  // -> 83-88 % of the probe; a static split gave about the same as guided
  // but no cover for a slow thread. The q/k/v and o loops lost the most.
  pool_->run(first_block.back(), run_blocks, 8, ThreadPool::Schedule::kGuided, lead);
  if (record_ != nullptr) record_->end_loop();
}

// Matmuls reading one input (q, k and v; gate and up). Decoding one token
// on the fast path they run as one parallel loop; otherwise one after
// another. The same results either way.
Result<FencePtr> CpuEngine::submit(const MatmulBatch& batch) {
  bool together = !batch.jobs.empty();
  for (const MatmulJob& j : batch.jobs) together = together && decode_loop(j) && j.x == batch.jobs[0].x;
  if (!together) return Engine::submit(batch);
  shared_in_.reset();
  jobs_.clear();
  for (const MatmulJob& j : batch.jobs) {
    jobs_.push_back({quant_weights(j.w.tier_tensor(), j.i8s_high_only), &quantize_input(j.w, j.x, shared_in_), j.y});
  }
  // The inputs are handed over while the other threads start on the rows:
  // what the caller does with them (another engine's jobs opened) is off
  // the critical path as far as a thread is free to take its place.
  std::function<void()> lead;
  if (batch.input_ready) {
    lead = [&] {
      for (size_t i = 0; i < jobs_.size(); ++i) {
        const QuantInput& in = *jobs_[i].in;
        const QuantizedToken xq{in.codes.data(), in.scale, in.sum, in.k};
        batch.input_ready(static_cast<int>(i), &xq);
      }
    };
  }
  if (lead && batch.inputs_first) {
    lead();
    lead = nullptr;
  }
  const int groups_of = batch.group_size > 0 ? batch.group_size : static_cast<int>(batch.jobs.size());
  matmuls_together(jobs_, batch.group_done ? groups_of : 0, batch.group_done, nullptr, lead);
  return FencePtr(std::make_shared<DoneFence>(Status::ok()));
}

}  // namespace ork
