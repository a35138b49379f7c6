#include "core/page_reach.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cmath>

namespace ork {
namespace {

TEST(PageReach, TheSpreadWalkWithinTwiceThePackedOneMeansHugeTranslations) {
  EXPECT_TRUE((PageReach{4.0, 4.5}).huge_translations());
  EXPECT_TRUE((PageReach{4.0, 7.9}).huge_translations());
  EXPECT_FALSE((PageReach{4.0, 8.0}).huge_translations());
  EXPECT_FALSE((PageReach{4.6, 37.6}).huge_translations());  // the Zen 5 VM of BENCHMARKS 10.15
}

TEST(PageReach, ABufferTooSmallIsNotMeasured) {
  std::vector<uint8_t> small(kPageReachBytes - 64);
  const PageReach r = measure_page_reach(small.data(), small.size());
  EXPECT_EQ(r.packed_ns, 0.0);
  EXPECT_EQ(r.spread_ns, 0.0);
  EXPECT_EQ(measure_page_reach(nullptr, kPageReachBytes).spread_ns, 0.0);
}

// Both walks run and take time on a buffer of small pages; the spread one,
// through 64 times as many pages, is not the faster (its classification
// depends on the machine's page walks, so it is not asserted here).
TEST(PageReach, BothWalksTakeTimeOnSmallPages) {
  void* p = mmap(nullptr, kPageReachBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  (void)madvise(p, kPageReachBytes, MADV_NOHUGEPAGE);
  const PageReach r = measure_page_reach(static_cast<uint8_t*>(p), kPageReachBytes);
  munmap(p, kPageReachBytes);
  EXPECT_TRUE(std::isfinite(r.packed_ns) && r.packed_ns > 0.1) << r.packed_ns;
  EXPECT_TRUE(std::isfinite(r.spread_ns) && r.spread_ns > 0.1) << r.spread_ns;
  EXPECT_GT(r.spread_ns, 0.8 * r.packed_ns);
}

}  // namespace
}  // namespace ork
