#include "core/page_reach.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace ork {
namespace {

// Links the lines at `at(order[i])` into one cycle in the order given and
// returns the best of three timed walks, in ns a step. The walk is a chain
// of dependent loads, so each step waits for its line's address to be
// translated and its line loaded.
template <class At>
double walk_ns(const std::vector<size_t>& order, const At& at) {
  const size_t n = order.size();
  for (size_t i = 0; i < n; ++i) {
    uint8_t* const next = at(order[(i + 1) % n]);
    std::memcpy(at(order[i]), &next, sizeof next);
  }
  const size_t steps = 8 * n;
  double best = 1e30;
  const uint8_t* p = at(order[0]);
  for (int run = 0; run < 4; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < steps; ++i) std::memcpy(&p, p, sizeof p);
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    if (run > 0) best = std::min(best, ns / static_cast<double>(steps));  // run 0 warms the caches
  }
  // Where the walk ended depends on every load: handed to an empty asm
  // statement, it keeps them all.
  asm volatile("" : : "r"(p) : "memory");
  return best;
}

}  // namespace

PageReach measure_page_reach(uint8_t* mem, size_t bytes) {
  PageReach r;
  if (mem == nullptr || bytes < kPageReachBytes) return r;
  std::vector<size_t> order(kPageReachLines);
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  // Line i of the spread walk sits in page i, at its line (i / 16) % 64:
  // on huge pages sixteen pages in a row and 64 lines in each make 1024
  // different cache sets, eight lines each (a line at one offset in every
  // page would fall in 16 sets, and out of the L2).
  r.spread_ns = walk_ns(order, [&](size_t i) { return mem + i * 4096 + (i / 16 % 64) * 64; });
  uint8_t* const packed = mem + kPageReachLines * 4096;
  r.packed_ns = walk_ns(order, [&](size_t i) { return packed + i * 64; });
  return r;
}

}  // namespace ork
