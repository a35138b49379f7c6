// The decode replay of `ork bench --profile` loop kind by loop kind: each
// kind's rate in decode itself, in the kernels' replay and in the plain
// read's, so a share of decode's time lost to the model's work around the
// loops shows up where it is lost (docs/BENCHMARKS.md 10.16).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "engines/cpu/read_replay.h"

namespace ork::cli {

class ReplayKinds {
 public:
  // One recorded token: its loops' bytes and decode's time for each (the
  // record's), and each loop's time in the kernels' replay and the plain one.
  void add(const ReadRecord& record, const std::vector<double>& kernels, const std::vector<double>& plain);
  bool empty() const { return kinds_.empty(); }

  // A table, largest kind first: loops of the kind a token, MB a token,
  // GB/s in decode, the kernels' replay and the plain read, and decode's
  // rate over the kernels'.
  void print(std::FILE* out) const;
  // `, "kinds": [...]`, for the replay's JSON object.
  std::string json() const;

 private:
  struct Kind {
    std::string name;
    size_t loops = 0;
    double bytes = 0, decode_s = 0, kernels_s = 0, plain_s = 0;
  };
  std::vector<Kind> sorted() const;

  std::vector<Kind> kinds_;  // in the order first seen
  int tokens_ = 0;
};

}  // namespace ork::cli
