// Overlay jobs opened on one thread while the CPU engine's other threads
// may already be done with the outputs they cover (the opening leads the
// CPU's loop rather than holding it up). Each output has a slot that the
// opener and the output's consumer race for: whichever comes first
// decides. A job published before its consumer comes is resolved by it; a
// consumer that comes first closes the slot, and a job opened too late is
// never taken (the overlay counts it a miss when the call ends). Nobody
// waits on anybody.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

namespace ork {

class JobSlots {
 public:
  // n slots, each waiting for its job. Not while a loop runs.
  void reset(size_t n) {
    if (n > cap_) {
      slots_ = std::make_unique<std::atomic<int>[]>(n);
      opened_ = std::make_unique<bool[]>(n);
      cap_ = n;
    }
    for (size_t i = 0; i < n; ++i) {
      slots_[i].store(kWaiting, std::memory_order_relaxed);
      opened_[i] = false;
    }
  }
  // The opener: whether output i's consumer has not come yet.
  bool waiting(size_t i) const { return slots_[i].load(std::memory_order_acquire) == kWaiting; }
  // The opener, once job `job` is opened for output i: hands it over.
  // False when the consumer came meanwhile (the job is left unresolved).
  bool publish(size_t i, int job) {
    opened_[i] = true;
    int expected = kWaiting;
    return slots_[i].compare_exchange_strong(expected, job, std::memory_order_acq_rel, std::memory_order_acquire);
  }
  // The consumer of output i: the job to resolve, or -1; closes the slot.
  int take(size_t i) {
    const int v = slots_[i].exchange(kClosed, std::memory_order_acq_rel);
    return v >= 0 ? v : -1;
  }
  // After the loop (joined): whether a job was opened for output i.
  bool opened(size_t i) const { return opened_[i]; }

 private:
  static constexpr int kWaiting = -2, kClosed = -3;
  std::unique_ptr<std::atomic<int>[]> slots_;
  std::unique_ptr<bool[]> opened_;  // the opener's own record
  size_t cap_ = 0;
};

}  // namespace ork
