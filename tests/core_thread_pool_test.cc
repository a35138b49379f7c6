#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

TEST(ThreadPool, SmallWorkStaysOnTheCaller) {
  ThreadPool pool(4);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> elsewhere{0};
  pool.run(10, [&](int64_t, int64_t) { elsewhere += std::this_thread::get_id() != caller; }, 100);
  EXPECT_EQ(elsewhere.load(), 0);
}

TEST(ThreadPool, ManyLoopsInARow) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int i = 0; i < 2000; ++i) pool.run(4, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 8000);
}

}  // namespace
}  // namespace ork
