#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>

namespace ork {

ThreadPool::ThreadPool(int n_threads) {
  for (int i = 1; i < std::max(1, n_threads); ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n;
    int slices;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      n = n_;
      slices = slices_;
    }
    if (index < slices) (*fn)(n * index / slices, n * (index + 1) / slices);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::run(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_per_thread) {
  if (n <= 0) return;
  const int64_t by_work = std::max<int64_t>(1, n / std::max<int64_t>(1, min_per_thread));
  const int slices = static_cast<int>(std::min<int64_t>(size(), by_work));
  if (slices <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    slices_ = slices;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  fn(0, n / slices);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
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
