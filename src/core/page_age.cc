#include "core/page_age.h"

#include <chrono>
#include <cstring>

namespace ork {
namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

constexpr size_t kPage = 4096;

}  // namespace

PageAge::PageAge(size_t bytes) : mem_(bytes) {
  if (mem_.data() != nullptr) std::memset(mem_.data(), 1, mem_.size());
  touched_at_ = now_s();
}

PageAge::Figures PageAge::measure() {
  Figures f;
  const size_t pages = mem_.size() / kPage;
  if (mem_.data() == nullptr || pages == 0) return f;
  // One byte a page at line `line` of each: independent loads, summed so
  // that none can be dropped; ns a page. Pass n reads line 23 n mod 64:
  // not a line beside one read before, which a prefetcher fetching lines
  // in pairs would have brought in with it.
  auto pass = [&](int n) {
    const uint8_t* p = mem_.data() + static_cast<size_t>(23 * n % 64) * 64;
    const double t0 = now_s();
    uint64_t sum = 0;
    for (size_t i = 0; i < pages; ++i) sum += p[i * kPage];
    const double ns = (now_s() - t0) * 1e9 / static_cast<double>(pages);
    asm volatile("" : : "r"(sum));
    return ns;
  };
  f.bytes = mem_.size();
  f.age_s = now_s() - touched_at_;
  f.aged_ns = pass(passes_++);
  f.fresh_ns = pass(passes_++);
  touched_at_ = now_s();
  return f;
}

}  // namespace ork
