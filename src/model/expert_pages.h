// Keeps a resident MoE model's routed experts' pages young: every 2 MiB
// region of their weights is read (one byte) in turn by the thread pool's
// idle workers (ThreadPool::set_idle_task), so that each is read every few
// tokens even where its expert was not routed to.
//
// Why: on a virtual machine whose host shadows the guest's page tables (a
// PVM guest, as the Zen 5 of docs/BENCHMARKS.md 10.16), a 2 MiB region left
// unread for some tens of milliseconds costs about 6 us at its next read -
// the host rebuilding its part of the shadow tables, on the reading thread,
// which no prefetch starts early. Each routed expert is read once in some
// 30 tokens, so decode paid it on nearly every expert it read: the expert
// loops ran at 0.79-0.87 of their replay, every other loop at its replay's
// rate. Touched by idle workers they run at the replay's rate. On a machine
// without the effect the touches cost a worker's idle time and nothing else.
// ORK_KEEP_EXPERT_PAGES=0 in the environment turns it off.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace ork {

class Model;

class ExpertPages {
 public:
  // The 2 MiB regions of the model's routed experts (their codes and
  // scales), if they are resident; none for a model without routed experts,
  // a mapped one or one whose experts an expert cache keeps on disk.
  explicit ExpertPages(const Model& model);
  ~ExpertPages();
  ExpertPages(const ExpertPages&) = delete;
  ExpertPages& operator=(const ExpertPages&) = delete;

  size_t regions() const { return regions_.size(); }
  // Reads the next region's first byte (round robin, any thread).
  void touch_next();
  // Hands touch_next to `pool`'s idle workers, unless there is nothing to
  // touch or ORK_KEEP_EXPERT_PAGES=0; the destructor takes it back, so
  // the pool must outlive this. (Context keeps it on the global pool, made
  // before it; a model held in a static made before the pool's first use
  // would outlive the pool at exit - none is.)
  void keep(ThreadPool& pool);

 private:
  std::vector<const uint8_t*> regions_;
  std::atomic<size_t> next_{0};
  ThreadPool* pool_ = nullptr;  // where keep() installed it
};

}  // namespace ork
