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

#include <cstdint>
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
  void clear();

  uint64_t bytes() const { return bytes_; }
  size_t loops() const { return loop_begin_.size(); }

  enum class Replay {
    kPlainRead,  // four streams a run of rows, no arithmetic
    kKernels,    // the decode kernels, one token of dummy activations
  };
  // Reads every loop's rows once, each loop split over the pool as
  // decode's loops are (runs of at least 32 rows, claimed as the threads
  // free up, a whole share of what is left at a time); returns the
  // seconds taken.
  double replay(ThreadPool& pool, Replay how = Replay::kPlainRead) const;

 private:
  struct Rows {
    QuantWeights w;  // a quantized matrix, or
    cpu::FloatWeights float_kind = cpu::FloatWeights::kF32;
    const void* float_data = nullptr;  // a float one (w.k its columns)
    int64_t r0 = 0, r1 = 0;
  };
  std::vector<Rows> rows_;
  std::vector<size_t> loop_begin_;  // index into rows_
  uint64_t bytes_ = 0;
};

}  // namespace ork
