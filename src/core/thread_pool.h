// A fixed set of persistent worker threads that run one parallel loop at a
// time: run(n, fn) calls fn(begin, end) on contiguous slices of [0, n),
// one slice per thread (the caller's thread takes slice 0), and returns
// when all are done. Workers sleep between loops; no allocation per loop.
//
// One loop at a time: run() must not be called concurrently or from inside
// fn. Threads: the pool owns them; destroy the pool to join them.
#pragma once

#include <condition_variable>
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

  // Slices smaller than `min_per_thread` items are not worth a thread.
  void run(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn, int64_t min_per_thread = 1);

  // The process-wide pool used by the model (sized by set_default_threads,
  // else by the hardware).
  static ThreadPool& global();
  static void set_default_threads(int n_threads);

 private:
  void worker(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int slices_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace ork
