// The weights one decoded token reads, loop by loop, as the CPU engine's
// parallel loops read them - recorded while the token runs, then read again
// in loops of the same rows, claimed the same way, with nothing between
// the loops: by a plain streaming read (no arithmetic), whose rate is what
// the memory gives this model's own access pattern - the same matrices,
// scattered as the pack lays them out, in the same runs between joins - and
// by the decode kernels themselves on a dummy input, whose rate is what
// they make of that pattern without the model's work around them. Decode's
// rate over the probe's then splits into the pattern's, the kernels' and
// the rest's (`ork bench --profile`; docs/BENCHMARKS.md 10.15).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/float_ops.h"
#include "kernels/quant_types.h"

namespace ork {

class ThreadPool;

class ReadRecord {
 public:
  // A parallel loop begins: the rows added until the next begins are read
  // in one loop.
  void begin_loop();
  // Rows [r0, r1) of a quantized matrix: both planes and the row scales.
  void add_rows(const QuantWeights& w, int64_t r0, int64_t r1);
  // Rows [r0, r1) of a float matrix of k columns.
  void add_float_rows(cpu::FloatWeights kind, const void* data, int64_t k, int64_t r0, int64_t r1);
  // The loop begun last has run: decode's own time for it is the time
  // since begin_loop() (the rows' recording and the loop's run).
  void end_loop();
  void clear();

  uint64_t bytes() const { return bytes_; }
  size_t loops() const { return loop_begin_.size(); }
  // Loop l's bytes, decode's seconds for it (0 if not ended), and its kind:
  // its matrices' shapes and code kind, runs of one shape counted, e.g.
  // "16 x 512x2048 i4" (a MoE layer's routed gate and up) or "8192x2048,
  // 2 x 512x2048 i4" - loops of one kind read alike, so their rates in
  // decode and in the replay compare kind by kind.
  uint64_t loop_bytes(size_t l) const { return loop_bytes_[l]; }
  double loop_seconds(size_t l) const { return loop_seconds_[l]; }
  std::string loop_kind(size_t l) const;

  enum class Replay {
    kPlainRead,  // four streams a run of rows, no arithmetic
    kKernels,    // the decode kernels, one token of dummy activations
  };
  // Reads every loop's rows once, each loop split over the pool as
  // decode's loops are (runs of at least 32 rows, claimed as the threads
  // free up, a whole share of what is left at a time); returns the
  // seconds taken, and each loop's in per_loop if given.
  double replay(ThreadPool& pool, Replay how = Replay::kPlainRead, std::vector<double>* per_loop = nullptr) const;

 private:
  struct Rows {
    QuantWeights w;  // a quantized matrix, or
    cpu::FloatWeights float_kind = cpu::FloatWeights::kF32;
    const void* float_data = nullptr;  // a float one (w.k its columns)
    int64_t r0 = 0, r1 = 0;
  };
  std::vector<Rows> rows_;
  size_t loop_end(size_t l) const { return l + 1 < loop_begin_.size() ? loop_begin_[l + 1] : rows_.size(); }
  void add_loop_bytes(uint64_t bytes);

  std::vector<size_t> loop_begin_;  // index into rows_
  std::vector<uint64_t> loop_bytes_;  // per loop
  std::vector<double> loop_seconds_;  // per loop, as end_loop() timed them (0 if not)
  std::chrono::steady_clock::time_point loop_start_;
  uint64_t bytes_ = 0;
};

}  // namespace ork
