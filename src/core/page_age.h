// What a read costs on pages left untouched for a while, against the same
// pages read a moment before: one byte of each 4 KiB page of a buffer made
// when the measurement began, read at the end (after whatever ran between)
// and at once again, each pass at lines the other did not read, so both
// come from memory and only the pages' age differs. On bare metal both
// cost a page walk or a TLB hit alike. On the Zen 5 VM of docs/BENCHMARKS.md
// 10.16 (a PVM guest: its host shadows the guest's page tables at 4 KiB) a
// page left alone for a second or more costs 11-25 ns more than one read
// within the last tens of milliseconds - the cost a MoE's routed experts,
// each read once in some 30 tokens, pay on every one of their pages, and
// which no prefetch hides there. `ork bench` prints it beside the pages line.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/mapped_file.h"

namespace ork {

class PageAge {
 public:
  // Makes the buffer (huge pages where granted) and writes every page: the
  // pages' age counts from here.
  explicit PageAge(size_t bytes = size_t{256} << 20);

  struct Figures {
    double age_s = 0;     // the pages' age at the first pass
    double aged_ns = 0;   // a page, the first pass
    double fresh_ns = 0;  // a page, the pass right after it
    size_t bytes = 0;     // the buffer read
  };
  // Both passes (zeros if the buffer could not be made). A second call
  // finds the pages as young as the time since the first.
  Figures measure();

 private:
  HugePages mem_;
  double touched_at_ = 0;  // steady clock, seconds
  int passes_ = 0;         // passes so far: pass i reads one line of each page (page_age.cc)
};

}  // namespace ork
