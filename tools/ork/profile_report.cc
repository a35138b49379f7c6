#include "profile_report.h"

#include <string>

#include <fmt/format.h>

namespace ork::cli {
namespace {

// "  GB/s  of probe" for a phase (or the total) that read `bytes` in `seconds`.
std::string rate(uint64_t bytes, double seconds, double probe_gbps) {
  if (bytes == 0 || seconds <= 0) return "";
  const double gbps = static_cast<double>(bytes) / seconds / 1e9;
  return probe_gbps > 0 ? fmt::format(" {:8.2f} {:8.1f} %", gbps, 100.0 * gbps / probe_gbps) : fmt::format(" {:8.2f}", gbps);
}

}  // namespace

void print_profile(std::FILE* out, const Context::Profile& profile, double probe_gbps, const std::string& title) {
  if (profile.tokens == 0) return;
  double total = 0, loops = 0;
  uint64_t bytes = 0;
  for (const Context::Profile::Entry& e : profile.phases) total += e.seconds, loops += e.loop_seconds, bytes += e.bytes;
  const auto tokens = static_cast<double>(profile.tokens);
  std::fprintf(out,
               "%-16s %llu tokens; per token, phase by phase (loops: the share of the phase's time in the\n"
               "                 pool's loops, the rest serial work; GB/s: the phase's bytes over its whole time)\n",
               title.c_str(), static_cast<unsigned long long>(profile.tokens));
  std::fprintf(out, "  %-22s %9s %7s %7s %10s %8s%s\n", "phase", "us/token", "share", "loops", "MB/token", "GB/s",
               probe_gbps > 0 ? "  of probe" : "");
  auto row = [&](const char* name, double seconds, double loop_seconds, uint64_t phase_bytes) {
    std::fprintf(out, "  %-22s %9.1f %6.1f %% %5.1f %% %10.2f%s\n", name, 1e6 * seconds / tokens,
                 total > 0 ? 100.0 * seconds / total : 0.0, seconds > 0 ? 100.0 * loop_seconds / seconds : 0.0,
                 static_cast<double>(phase_bytes) / tokens / 1e6, rate(phase_bytes, seconds, probe_gbps).c_str());
  };
  for (int i = 0; i < Context::Profile::kPhases; ++i) {
    const Context::Profile::Entry& e = profile.phases[static_cast<size_t>(i)];
    if (e.seconds == 0 && e.bytes == 0) continue;
    row(Context::Profile::name(static_cast<Context::Profile::Phase>(i)), e.seconds, e.loop_seconds, e.bytes);
  }
  row("total", total, loops, bytes);
}

std::string profile_json(const Context::Profile& profile) {
  if (profile.tokens == 0) return "";
  std::string out = ", \"profile\": [";
  const auto tokens = static_cast<double>(profile.tokens);
  bool first = true;
  for (int i = 0; i < Context::Profile::kPhases; ++i) {
    const Context::Profile::Entry& e = profile.phases[static_cast<size_t>(i)];
    if (e.seconds == 0 && e.bytes == 0) continue;
    out += fmt::format("{}{{\"phase\": \"{}\", \"us_per_token\": {:.2f}, \"loop_us_per_token\": {:.2f}, \"bytes_per_token\": {:.0f}}}",
                       first ? "" : ", ", Context::Profile::name(static_cast<Context::Profile::Phase>(i)),
                       1e6 * e.seconds / tokens, 1e6 * e.loop_seconds / tokens, static_cast<double>(e.bytes) / tokens);
    first = false;
  }
  return out + "]";
}

}  // namespace ork::cli
