// The weights one decoded token reads, loop by loop, as the CPU engine's
// parallel loops read them - recorded while the token runs, then read again
// by a plain streaming read (no arithmetic) in loops of the same ranges,
// claimed the same way. Its rate is what the memory gives this model's
// own access pattern: the same matrices, scattered as the pack lays them
// out, in the same runs between joins. Decode's rate over the probe's is
// then split into what the pattern allows and what the kernels leave of it
// (`ork bench --profile`; docs/BENCHMARKS.md 10.15).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/quant_types.h"

namespace ork {

class ThreadPool;

class ReadRecord {
 public:
  // A parallel loop begins: the ranges added until the next begins are read
  // in one loop.
  void begin_loop();
  // Rows [r0, r1) of a quantized matrix: both planes and the row scales.
  void add_rows(const QuantWeights& w, int64_t r0, int64_t r1);
  // Any other bytes the loop reads (a float matrix's rows).
  void add(const void* p, int64_t bytes);
  void clear();

  uint64_t bytes() const { return bytes_; }
  size_t loops() const { return loop_begin_.size(); }

  // Reads every loop's ranges once, each loop split over the pool as
  // decode's loops are (runs of at least 32 KiB, claimed as the threads
  // free up, four streams a run); returns the seconds taken.
  double replay(ThreadPool& pool) const;

 private:
  struct Range {
    const uint8_t* p;
    int64_t bytes;
  };
  std::vector<Range> ranges_;
  std::vector<size_t> loop_begin_;  // index into ranges_
  uint64_t bytes_ = 0;
};

}  // namespace ork
