// Whether the machine translates a huge-page buffer at the huge page's size:
// a dependent walk through the same lines, once packed together and once
// one to a 4 KiB page. On a machine whose TLB holds the 2 MiB entries the
// two cost about the same; where the buffer is translated at 4 KiB after
// all - a virtual machine whose host maps its memory in 4 KiB pages, or a
// kernel that granted no huge page - the spread walk misses the TLB at
// every step and costs many times more. `ork bench` prints it beside the
// read bandwidth, since reads of scattered regions (a MoE's routed experts)
// pay a page walk at every 4 KiB there (docs/BENCHMARKS.md 10.15).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ork {

struct PageReach {
  double packed_ns = 0;  // a step of the walk through lines packed together
  double spread_ns = 0;  // through as many lines, one in each 4 KiB page
  // The spread walk within 2x the packed one: the TLB reaches over the
  // spread. Where it does not, each step adds a page walk: about 10x on
  // the Zen 5 VM of docs/BENCHMARKS.md 10.15, and a walk whose tables the
  // caches hold still costs tens of cycles beside the packed walk's L2 hit.
  bool huge_translations() const { return spread_ns < 2.0 * packed_ns; }
};

// The lines a walk visits: more 4 KiB pages than any TLB of the machines ork
// targets holds (Zen 5's L2 TLB 4096 entries, a Cortex-A76's 1280), in
// 512 KiB of lines, which the L2 or the L3 holds either way.
inline constexpr size_t kPageReachLines = 8192;

// Bytes the probe writes its walks into: the spread walk's pages, then the
// packed walk's lines.
inline constexpr size_t kPageReachBytes = kPageReachLines * 4096 + kPageReachLines * 64;

// Measures both walks over mem (at least kPageReachBytes, 64-byte aligned,
// on the pages to be judged; its contents are overwritten), the best of
// three runs of each.
PageReach measure_page_reach(uint8_t* mem, size_t bytes);

}  // namespace ork
