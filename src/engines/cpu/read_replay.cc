#include "engines/cpu/read_replay.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "core/thread_pool.h"
#include "kernels/cpu/float_ops.h"

namespace ork {
namespace {

// The unit a loop's ranges are claimed in: decode's loops claim at least
// 32 rows, 32 KiB of a 2048-wide i4 matrix.
constexpr int64_t kUnit = int64_t{32} << 10;

}  // namespace

void ReadRecord::begin_loop() {
  if (!loop_begin_.empty() && loop_begin_.back() == ranges_.size()) return;  // an empty loop reads nothing
  loop_begin_.push_back(ranges_.size());
}

void ReadRecord::add(const void* p, int64_t bytes) {
  if (p == nullptr || bytes <= 0) return;
  if (loop_begin_.empty()) loop_begin_.push_back(0);
  ranges_.push_back({static_cast<const uint8_t*>(p), bytes});
  bytes_ += static_cast<uint64_t>(bytes);
}

void ReadRecord::add_rows(const QuantWeights& w, int64_t r0, int64_t r1) {
  const int64_t b0 = plane0_row_bytes(w.kind, w.k), b1 = plane1_row_bytes(w.kind, w.k);
  add(w.p0 + r0 * b0, (r1 - r0) * b0);
  if (b1 > 0) add(w.p1 + r0 * b1, (r1 - r0) * b1);
  if (w.scales != nullptr) add(w.scales + r0, (r1 - r0) * static_cast<int64_t>(sizeof(float)));
}

void ReadRecord::clear() {
  ranges_.clear();
  loop_begin_.clear();
  bytes_ = 0;
}

double ReadRecord::replay(ThreadPool& pool) const {
  // Each loop's ranges in units, laid out before the clock starts.
  struct Unit {
    uint32_t range;
    int64_t at, bytes;
  };
  std::vector<std::vector<Unit>> loops(loop_begin_.size());
  for (size_t l = 0; l < loop_begin_.size(); ++l) {
    const size_t end = l + 1 < loop_begin_.size() ? loop_begin_[l + 1] : ranges_.size();
    for (size_t r = loop_begin_[l]; r < end; ++r) {
      for (int64_t at = 0; at < ranges_[r].bytes; at += kUnit) {
        loops[l].push_back({static_cast<uint32_t>(r), at, std::min(kUnit, ranges_[r].bytes - at)});
      }
    }
  }
  std::atomic<uint64_t> sink{0};
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::vector<Unit>& units : loops) {
    pool.run(
        static_cast<int64_t>(units.size()),
        [&](int64_t b, int64_t e) {
          uint64_t s = 0;
          // A claim's consecutive units of one range are one read of four
          // streams, as a claim's rows of one matrix are one kernel call.
          while (b < e) {
            const Unit& first = units[static_cast<size_t>(b)];
            int64_t bytes = first.bytes;
            for (++b; b < e && units[static_cast<size_t>(b)].range == first.range; ++b) {
              bytes += units[static_cast<size_t>(b)].bytes;
            }
            const auto* p = reinterpret_cast<const uint64_t*>(ranges_[first.range].p + first.at);
            s += cpu::stream_read(p, bytes / 8, 4);
          }
          sink.fetch_add(s, std::memory_order_relaxed);
        },
        1, ThreadPool::Schedule::kGuided);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The sum depends on every load: a value the compiler must produce.
  asm volatile("" : : "r"(sink.load()) : "memory");
  return seconds;
}

}  // namespace ork
