#include "expert_report.h"

#include <fmt/format.h>

namespace ork::cli {

ExpertCacheStats expert_stats_since(const ExpertCacheStats& after, const ExpertCacheStats& before) {
  ExpertCacheStats d = after;
  d.requests -= before.requests;
  d.hits -= before.hits;
  d.prefetches -= before.prefetches;
  d.prefetch_used -= before.prefetch_used;
  d.bytes_read -= before.bytes_read;
  d.reads -= before.reads;
  d.read_seconds -= before.read_seconds;
  d.busy_seconds -= before.busy_seconds;
  d.stall_seconds -= before.stall_seconds;
  return d;
}

void add_expert_stats(ExpertCacheStats& sum, const ExpertCacheStats& d) {
  const ExpertCacheStats before = sum;
  sum = d;
  sum.requests += before.requests;
  sum.hits += before.hits;
  sum.prefetches += before.prefetches;
  sum.prefetch_used += before.prefetch_used;
  sum.bytes_read += before.bytes_read;
  sum.reads += before.reads;
  sum.read_seconds += before.read_seconds;
  sum.busy_seconds += before.busy_seconds;
  sum.stall_seconds += before.stall_seconds;
}

namespace {

struct Rates {
  double mb_per_token, gbps, stall_ms, read_ms;
};

Rates rates(const ExpertCacheStats& s, uint64_t tokens) {
  const double t = tokens > 0 ? static_cast<double>(tokens) : 1.0;
  // The disk's rate: bytes over the wall time with a read in flight (reads
  // at once overlap; their summed times would understate it).
  return {static_cast<double>(s.bytes_read) / 1e6 / t,
          s.busy_seconds > 0 ? static_cast<double>(s.bytes_read) / s.busy_seconds / 1e9 : 0.0, s.stall_seconds * 1e3 / t,
          s.busy_seconds * 1e3 / t};
}

}  // namespace

void print_expert_stats(std::FILE* out, const char* what, const ExpertCacheStats& s, uint64_t tokens) {
  const Rates r = rates(s, tokens);
  std::fprintf(out,
               "ork: experts: %s: hit rate %.1f %% (%llu of %llu asked), %.2f MB read from disk per token (%s reads, "
               "%.2f GB/s while reading), %.2f ms per token stalled on reads; prefetch %llu started, %llu used; cache %llu "
               "experts of %.2f MiB\n",
               what, 100.0 * s.hit_rate(), static_cast<unsigned long long>(s.hits),
               static_cast<unsigned long long>(s.requests), r.mb_per_token, s.direct ? "direct" : "buffered", r.gbps,
               r.stall_ms, static_cast<unsigned long long>(s.prefetches), static_cast<unsigned long long>(s.prefetch_used),
               static_cast<unsigned long long>(s.slots), static_cast<double>(s.slot_bytes) / (1 << 20));
}

std::string expert_stats_json(const ExpertCacheStats& s, uint64_t tokens) {
  const Rates r = rates(s, tokens);
  std::string out = fmt::format(
      "{{\"slots\": {}, \"slot_bytes\": {}, \"requests\": {}, \"hits\": {}, \"hit_rate\": {:.4f}, \"bytes_read\": {}, "
      "\"disk_read_gbps\": {:.3f}, \"prefetches\": {}, \"prefetch_used\": {}, \"direct\": {}",
      s.slots, s.slot_bytes, s.requests, s.hits, s.hit_rate(), s.bytes_read, r.gbps, s.prefetches, s.prefetch_used,
      s.direct ? "true" : "false");
  if (tokens > 0) {
    out += fmt::format(", \"mb_read_per_token\": {:.4f}, \"reading_ms_per_token\": {:.4f}, \"stall_ms_per_token\": {:.4f}",
                       r.mb_per_token, r.read_ms, r.stall_ms);
  }
  return out + "}";
}

}  // namespace ork::cli
