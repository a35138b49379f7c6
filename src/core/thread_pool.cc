#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ork {
namespace {

// About 50-100 microseconds of polling: longer than the gap between two
// matmuls of one token, far shorter than a user's pause. Every 256th poll
// yields the core, so an oversubscribed machine (more runnable threads than
// cores) still lets the thread being waited for run.
constexpr int kSpinIterations = 1 << 15;

// A spinning worker runs the idle task once in this many polls (a power of 2).
constexpr int kIdleEvery = 8;

inline void cpu_relax(int spin) {
  if ((spin & 255) == 255) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Sleeps while *word == expected (futex: the check and the sleep are one
// atomic step in the kernel, so a store-then-wake between them is not lost).
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  for (int i = 1; i < std::max(1, n_threads); ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(generation_);
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      cpu_relax(spin);
      if ((spin & (kIdleEvery - 1)) == kIdleEvery - 1) run_idle_task();
      gen = generation_.load(std::memory_order_acquire);
    }
    while (gen == seen) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      // Pairs with the fence in run(): either run() sees this sleeper and
      // notifies, or this wait sees the new generation and returns at once.
      std::atomic_thread_fence(std::memory_order_seq_cst);
      futex_wait(generation_, seen);
      sleepers_.fetch_sub(1, std::memory_order_acq_rel);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    run_share(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) futex_wake_all(pending_);
  }
}

// The idle task once. Counted in before the task is read (both seq_cst),
// so set_idle_task, which swaps the task and then waits for the count to
// reach zero, never returns while a worker still runs the old one.
void ThreadPool::run_idle_task() {
  if (idle_.load(std::memory_order_relaxed) == nullptr) return;  // the usual case: nothing to do
  in_idle_.fetch_add(1, std::memory_order_seq_cst);
  if (const Idle* idle = idle_.load(std::memory_order_seq_cst); idle != nullptr) idle->task(idle->arg);
  in_idle_.fetch_sub(1, std::memory_order_release);
}

ThreadPool::Idle ThreadPool::set_idle_task(Idle idle) {
  const std::lock_guard lock(idle_mu_);
  const Idle* before = idle_.load(std::memory_order_relaxed);
  const Idle replaced = before != nullptr ? *before : Idle{};
  // The new task goes into the slot not in use; the old slot stays as it
  // is until no worker can be reading it.
  const Idle* next = nullptr;
  if (idle.task != nullptr) {
    idle_slot_ ^= 1;
    idle_slots_[idle_slot_] = idle;
    next = &idle_slots_[idle_slot_];
  }
  idle_.store(next, std::memory_order_seq_cst);
  while (in_idle_.load(std::memory_order_seq_cst) != 0) cpu_relax(0);
  return replaced;
}

void ThreadPool::run_share(int index) {
  if (index >= slices_) return;
  if (!shared_) {
    (*fn_)(n_ * index / slices_, n_ * (index + 1) / slices_);
    return;
  }
  int64_t b = next_.load(std::memory_order_relaxed);
  while (b < n_) {
    const int64_t e = std::min(n_, b + std::max(grain_, (n_ - b) / claim_divisor_));
    if (next_.compare_exchange_weak(b, e, std::memory_order_relaxed)) {
      (*fn_)(b, e);
      b = next_.load(std::memory_order_relaxed);
    }
  }
}

void ThreadPool::run(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_per_thread,
                     Schedule schedule, const std::function<void()>& lead) {
  if (n <= 0) {
    if (lead) lead();
    return;
  }
  const int64_t by_work = std::max<int64_t>(1, n / std::max<int64_t>(1, min_per_thread));
  const int slices = static_cast<int>(std::min<int64_t>(size(), by_work));
  if (slices <= 1) {
    if (lead) lead();
    const auto t0 = timing_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    fn(0, n);
    if (timing_) loop_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return;
  }
  fn_ = &fn;
  n_ = n;
  slices_ = slices;
  shared_ = schedule != Schedule::kStatic;
  claim_divisor_ = (schedule == Schedule::kGuided ? 1 : 2) * slices;
  grain_ = std::max<int64_t>(1, min_per_thread);
  next_.store(0, std::memory_order_relaxed);
  pending_.store(static_cast<uint32_t>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  // The seq_cst fence orders the generation store before the sleeper
  // count read, pairing with the worker's increment before it waits.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_acquire) > 0) futex_wake_all(generation_);
  if (lead) lead();
  // Timed from here: the lead is the caller's serial work, and may itself
  // close a profile's phase (Context::lap), which the loop's time must not
  // reach back into.
  const auto t0 = timing_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  run_share(0);
  uint32_t left = pending_.load(std::memory_order_acquire);
  for (int spin = 0; left != 0 && spin < kSpinIterations; ++spin) {
    cpu_relax(spin);
    left = pending_.load(std::memory_order_acquire);
  }
  while (left != 0) {
    futex_wait(pending_, left);
    left = pending_.load(std::memory_order_acquire);
  }
  if (timing_) loop_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

namespace {
std::atomic<int> g_default_threads{0};
}

void ThreadPool::set_default_threads(int n_threads) { g_default_threads = n_threads; }

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(g_default_threads > 0 ? g_default_threads.load()
                                               : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return pool;
}

}  // namespace ork
