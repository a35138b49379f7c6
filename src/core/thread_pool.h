// A fixed set of persistent worker threads that run one parallel loop at a
// time: run(n, fn) calls fn(begin, end) on contiguous slices of [0, n),
// one slice per thread (the caller's thread takes slice 0), and returns
// when all are done. No allocation and no lock per loop.
//
// With Schedule::kShared the threads instead claim slices from one shared
// counter, largest first (half of what is left, shared between the
// threads, down to `min_per_thread` items), so a thread that runs slow for
// a while - another process on its core, a page fault - is covered by the
// others instead of holding up the join. Any split gives the same results
// as long as fn's work on an item does not depend on its slice.
//
// Decode runs a hundred or more short loops per token, so the hand-off is
// a spin on one atomic generation counter and the join a spin on an atomic
// count; a worker that has spun for `kSpinIterations` without work sleeps
// on the counter (a Linux futex) until the next loop, so idle pools cost no CPU.
//
// One loop at a time: run() must not be called concurrently or from inside
// fn. Threads: the pool owns them; destroy the pool to join them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ork {

class ThreadPool {
 public:
  // n_threads counts the caller: 1 means no workers (run() is a plain call).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // kGuided: as kShared, but each claim is a whole share of what is left
  // (half of it for two threads), so a thread reads fewer, longer runs of
  // items and a slow one holds at most its first claim.
  enum class Schedule { kStatic, kShared, kGuided };

  // Slices smaller than `min_per_thread` items are not worth a thread.
  // `lead`, when given, runs once on the calling thread after the workers
  // have been started and before it takes its own share: serial work that
  // belongs with the loop (with kShared the others take the items it would
  // have) - it may run while items are already done, never after the join.
  void run(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn, int64_t min_per_thread = 1,
           Schedule schedule = Schedule::kStatic, const std::function<void()>& lead = nullptr);

  // Off by default: while on, run() adds the wall time of each loop (from
  // the lead's end to the join; a loop too small to split, or any loop of a
  // pool of one, from the lead's end to its end on the caller) to
  // loop_seconds(), which profiles use to tell the loops' time from the
  // serial work between them - on one thread too.
  void set_timing(bool on) { timing_ = on; }
  double loop_seconds() const { return loop_seconds_; }

  // Work for workers with nothing to do: while a worker spins waiting for
  // the next loop (not once it sleeps), it calls `task` every few polls.
  // Each call must be short - it delays the worker's next loop by as much
  // (model/expert_pages.h touches one page a call). One task at a time;
  // it returns the task it replaced, and once it has returned no worker
  // is still inside that one, so what it reads may go. Null: none. Any
  // thread may call it, also while a loop runs.
  using IdleTask = void (*)(void* arg);
  struct Idle {
    IdleTask task = nullptr;
    void* arg = nullptr;
  };
  Idle set_idle_task(Idle idle);

  // The process-wide pool used by the model (sized by set_default_threads,
  // else by the hardware).
  static ThreadPool& global();
  static void set_default_threads(int n_threads);

 private:
  void worker(int index);
  // This thread's part of the current loop.
  void run_share(int index);
  void run_idle_task();

  std::vector<std::thread> workers_;
  // Written by run() before the generation is bumped (release), read by
  // workers after they see it (acquire).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int slices_ = 0;
  bool shared_ = false;
  // kShared: claims of (items left) / (2 x slices); kGuided: / slices.
  int claim_divisor_ = 2;
  int64_t grain_ = 1;
  bool timing_ = false;
  double loop_seconds_ = 0;
  // kShared: the first item not yet claimed, on a line of its own.
  alignas(64) std::atomic<int64_t> next_{0};
  // 32-bit words a futex can sleep on; wrap-around is harmless (== compares).
  alignas(64) std::atomic<uint32_t> generation_{0};
  std::atomic<uint32_t> pending_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  // The idle task (set_idle_task): the current one, and the workers inside
  // a call of it, each on a line of its own away from the loop's words.
  alignas(64) std::atomic<const Idle*> idle_{nullptr};
  alignas(64) std::atomic<int> in_idle_{0};
  std::mutex idle_mu_;  // one set_idle_task at a time
  Idle idle_slots_[2];  // the current task's copy and the one before it
  int idle_slot_ = 0;
};

}  // namespace ork
