#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace ork {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceForAnySize) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 3; ++rep) {
        pool.run(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
      }
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 3) << threads << " " << n;
    }
  }
}

TEST(ThreadPool, SharedAndGuidedSchedulesCoverEveryIndexOnceInSlicesOfAtLeastTheGrain) {
  for (auto schedule : {ThreadPool::Schedule::kShared, ThreadPool::Schedule::kGuided})
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
      for (int64_t grain : {1, 5, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int64_t> smallest{n};
        std::atomic<int> slices{0};
        pool.run(
            n,
            [&](int64_t b, int64_t e) {
              for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
              // Only the last slice may be shorter than the grain.
              if (e < n) {
                int64_t s = smallest.load();
                while (e - b < s && !smallest.compare_exchange_weak(s, e - b)) {
                }
              }
              ++slices;
            },
            grain, schedule);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << threads << " " << n;
        EXPECT_GE(smallest.load(), std::min(n, grain)) << threads << " " << n << " " << grain;
        if (threads > 1 && n >= 4 * grain * threads) {
          EXPECT_GT(slices.load(), threads);
        }
      }
    }
  }
}

// A thread held up in its first slice: the others take over the rest.
// Shared: its first claim is a quarter of the work (half of what two share);
// guided: half, the whole share, and the rest goes in halves of what is
// left - about log2(1000) claims, where a quarter at a time makes about
// twice as many.
TEST(ThreadPool, SharedAndGuidedSchedulesLetTheOtherThreadsTakeOverFromASlowOne) {
  struct Case {
    ThreadPool::Schedule schedule;
    int64_t first_claim;
    int max_claims;
  };
  for (const Case& c : {Case{ThreadPool::Schedule::kShared, 250, 40}, Case{ThreadPool::Schedule::kGuided, 500, 12}}) {
    ThreadPool pool(2);
    std::atomic<int64_t> by_slow{0}, total{0};
    std::atomic<int> claims{0};
    std::atomic<bool> first{true};
    pool.run(
        1000,
        [&](int64_t b, int64_t e) {
          ++claims;
          if (first.exchange(false)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            by_slow += e - b;
          }
          total += e - b;
        },
        1, c.schedule);
    EXPECT_EQ(total.load(), 1000);
    EXPECT_LE(by_slow.load(), c.first_claim);
    EXPECT_LE(claims.load(), c.max_claims);
  }
}

TEST(ThreadPool, SmallWorkStaysOnTheCaller) {
  ThreadPool pool(4);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  pool.run(10, [&](int64_t, int64_t) { elsewhere += std::this_thread::get_id() != caller; }, 100);
  EXPECT_EQ(elsewhere.load(), 0);
}

// With timing on, every loop's time counts, the lead's not: a loop split
// over threads, one too small to split, and any loop of a pool of one (a
// one-thread profile had shown no time in loops at all).
TEST(ThreadPool, TimingCountsEveryLoopButNotItsLead) {
  auto sleep_ms = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    pool.set_timing(true);
    pool.run(1, [&](int64_t, int64_t) { sleep_ms(20); }, 1, ThreadPool::Schedule::kStatic, [&] { sleep_ms(200); });
    EXPECT_GE(pool.loop_seconds(), 0.019) << threads << " threads, one item";
    EXPECT_LT(pool.loop_seconds(), 0.15) << threads << " threads, one item: the lead counted";
    const double before = pool.loop_seconds();
    pool.run(8, [&](int64_t b, int64_t e) { sleep_ms(static_cast<int>(5 * (e - b))); });
    EXPECT_GE(pool.loop_seconds() - before, 0.019) << threads << " threads, eight items";
    pool.set_timing(false);
    const double off = pool.loop_seconds();
    pool.run(1, [&](int64_t, int64_t) { sleep_ms(5); });
    EXPECT_EQ(pool.loop_seconds(), off) << "timing off";
  }
}

// The lead runs once on the calling thread, whatever the size of the loop
// and the pool; with the shared schedule the others meanwhile take the
// items, so a long lead leaves its thread few of them.
TEST(ThreadPool, TheLeadRunsOnceOnTheCallerWhileTheOthersStart) {
  const auto caller = std::this_thread::get_id();
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 1000}) {
      int leads = 0;
      bool on_caller = true;
      std::atomic<int64_t> total{0};
      pool.run(
          n, [&](int64_t b, int64_t e) { total += e - b; }, 1, ThreadPool::Schedule::kShared,
          [&] {
            ++leads;
            on_caller = on_caller && std::this_thread::get_id() == caller;
          });
      EXPECT_EQ(leads, 1) << threads << " threads, n " << n;
      EXPECT_TRUE(on_caller);
      EXPECT_EQ(total.load(), n);
    }
  }
  ThreadPool pool(2);
  std::atomic<int64_t> by_caller{0}, total{0};
  pool.run(
      1000,
      [&](int64_t b, int64_t e) {
        if (std::this_thread::get_id() == caller) by_caller += e - b;
        total += e - b;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      },
      1, ThreadPool::Schedule::kShared, [] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
  EXPECT_EQ(total.load(), 1000);
  EXPECT_LE(by_caller.load(), 500);  // the worker took the first half while the lead ran
}

TEST(ThreadPool, ManyLoopsInARow) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int i = 0; i < 2000; ++i) pool.run(4, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 8000);
}

// A worker waiting for the next loop runs the idle task; once
// set_idle_task has replaced it, no call of it is running or starts.
TEST(ThreadPool, IdleWorkersRunTheIdleTaskUntilItIsTakenBack) {
  ThreadPool pool(2);
  struct Count {
    std::atomic<int64_t> calls{0};
    std::atomic<bool> inside{false};
  } count;
  auto task = [](void* arg) {
    auto* c = static_cast<Count*>(arg);
    c->inside = true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // a slow call, to be waited for
    c->calls.fetch_add(1);
    c->inside = false;
  };
  EXPECT_EQ(pool.set_idle_task({task, &count}).task, nullptr);
  pool.run(4, [](int64_t, int64_t) {});  // wakes the worker, which then spins: idle
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (count.calls.load() < 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(count.calls.load(), 3);
  const ThreadPool::Idle replaced = pool.set_idle_task({});
  EXPECT_EQ(replaced.arg, &count);
  EXPECT_FALSE(count.inside.load());  // not running now...
  const int64_t calls = count.calls.load();
  pool.run(4, [](int64_t, int64_t) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(count.calls.load(), calls);  // ...nor again
}

// Loops run as before with an idle task set, and every index once.
TEST(ThreadPool, LoopsRunBesideAnIdleTask) {
  ThreadPool pool(3);
  std::atomic<int64_t> idle_calls{0};
  (void)pool.set_idle_task({[](void* arg) { static_cast<std::atomic<int64_t>*>(arg)->fetch_add(1); }, &idle_calls});
  std::atomic<int64_t> sum{0};
  for (int i = 0; i < 2000; ++i) {
    pool.run(64, [&](int64_t b, int64_t e) { sum += e - b; }, 1, ThreadPool::Schedule::kGuided);
  }
  EXPECT_EQ(sum.load(), 2000 * 64);
  (void)pool.set_idle_task({});
}

// Tasks set and taken back from two threads at once, while loops run: each
// swap waits for the workers inside the task it replaced, and none is lost
// track of (the sanitizer builds run this too).
TEST(ThreadPool, IdleTasksSwappedFromSeveralThreadsWhileLoopsRun) {
  ThreadPool pool(3);
  std::atomic<int64_t> a_calls{0}, b_calls{0};
  auto count = [](void* arg) { static_cast<std::atomic<int64_t>*>(arg)->fetch_add(1); };
  std::atomic<bool> done{false};
  auto swapper = [&](std::atomic<int64_t>* mine) {
    for (int i = 0; i < 200; ++i) {
      (void)pool.set_idle_task({count, mine});
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      (void)pool.set_idle_task({});
    }
  };
  std::thread a(swapper, &a_calls), b(swapper, &b_calls);
  std::atomic<int64_t> sum{0};
  while (!done.load()) {
    pool.run(16, [&](int64_t lo, int64_t hi) { sum += hi - lo; });
    if (sum.load() >= 16 * 2000) done = true;
  }
  a.join();
  b.join();
  const ThreadPool::Idle last = pool.set_idle_task({});
  EXPECT_TRUE(last.arg == nullptr || last.arg == &a_calls || last.arg == &b_calls);
  const int64_t a_now = a_calls.load(), b_now = b_calls.load();
  pool.run(16, [](int64_t, int64_t) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(a_calls.load(), a_now);  // none runs once taken back
  EXPECT_EQ(b_calls.load(), b_now);
}

}  // namespace
}  // namespace ork
