#include "replay_report.h"

#include <algorithm>

#include <fmt/format.h>

namespace ork::cli {

void ReplayKinds::add(const ReadRecord& record, const std::vector<double>& kernels, const std::vector<double>& plain) {
  ++tokens_;
  for (size_t l = 0; l < record.loops(); ++l) {
    const std::string name = record.loop_kind(l);
    auto it = std::find_if(kinds_.begin(), kinds_.end(), [&](const Kind& k) { return k.name == name; });
    if (it == kinds_.end()) it = kinds_.insert(kinds_.end(), Kind{name});
    ++it->loops;
    it->bytes += static_cast<double>(record.loop_bytes(l));
    it->decode_s += record.loop_seconds(l);
    if (l < kernels.size()) it->kernels_s += kernels[l];
    if (l < plain.size()) it->plain_s += plain[l];
  }
}

std::vector<ReplayKinds::Kind> ReplayKinds::sorted() const {
  std::vector<Kind> kinds = kinds_;
  std::stable_sort(kinds.begin(), kinds.end(), [](const Kind& a, const Kind& b) { return a.bytes > b.bytes; });
  return kinds;
}

namespace {

double gbps(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; }

}  // namespace

void ReplayKinds::print(std::FILE* out) const {
  if (kinds_.empty()) return;
  std::fprintf(out,
               "decode replay    by loop kind (%d tokens): each kind's bytes over its loops' time in decode, in the "
               "kernels' replay and in the plain read's, GB/s\n", tokens_);
  std::fprintf(out, "  %-40s %8s %9s %8s %8s %8s %15s\n", "loops (matrices, rows x k)", "a token", "MB/token", "decode",
               "kernels", "plain", "decode/kernels");
  const double t = std::max(1, tokens_);
  for (const Kind& k : sorted()) {
    const double d = gbps(k.bytes, k.decode_s), kr = gbps(k.bytes, k.kernels_s), p = gbps(k.bytes, k.plain_s);
    std::fprintf(out, "  %-40s %8.0f %9.2f %8.2f %8.2f %8.2f %15.2f\n", k.name.c_str(),
                 static_cast<double>(k.loops) / t, k.bytes / t / 1e6, d, kr, p, kr > 0 ? d / kr : 0.0);
  }
}

std::string ReplayKinds::json() const {
  std::string s = ", \"kinds\": [";
  bool first = true;
  const double t = std::max(1, tokens_);
  for (const Kind& k : sorted()) {
    s += fmt::format("{}{{\"kind\": \"{}\", \"loops_per_token\": {:.2f}, \"mb_per_token\": {:.3f}, "
                     "\"decode_gbps\": {:.3f}, \"kernels_gbps\": {:.3f}, \"plain_gbps\": {:.3f}}}",
                     first ? "" : ", ", k.name, static_cast<double>(k.loops) / t, k.bytes / t / 1e6,
                     gbps(k.bytes, k.decode_s), gbps(k.bytes, k.kernels_s), gbps(k.bytes, k.plain_s));
    first = false;
  }
  return s + "]";
}

}  // namespace ork::cli
