// One trace for a whole run (DESIGN section 6): the CPU's phases, the
// dispatcher's decisions and every vnpu DMA push and wait, compute section,
// fence, flush and map/unmap land in one file, each on a track of its own
// ("cpu", "dispatch", "vnpu session 0", ...), as complete events with a
// small integer of progress (the tile, sequence number, token or mapping
// count it concerns). write_json() emits the Chrome trace-event format,
// which Perfetto's UI and chrome://tracing load.
//
// Thread-safe: any thread may add events.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ork/status.h"

namespace ork {

struct TraceEvent {
  const char* name;      // a string literal: events do not own their names
  int track = 0;
  double start_us = 0;   // since the trace began
  double dur_us = 0;
  int64_t progress = 0;
};

class Trace {
 public:
  Trace() : t0_(std::chrono::steady_clock::now()) {}
  double now_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
  }
  // The id of the track called `name`, made on first use.
  int track(const std::string& name);
  // An event from start_us to now.
  void add(const char* name, int track, double start_us, int64_t progress) {
    add_span(name, track, start_us, now_us() - start_us, progress);
  }
  void add_span(const char* name, int track, double start_us, double dur_us, int64_t progress) {
    std::lock_guard lock(mu_);
    events_.push_back({name, track, start_us, dur_us, progress});
  }
  std::vector<TraceEvent> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::vector<std::string> tracks() const {
    std::lock_guard lock(mu_);
    return tracks_;
  }
  // Written through an OutputFile: a complete file or none.
  Status write_json(const std::string& path) const;

 private:
  std::chrono::steady_clock::time_point t0_;
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
  std::vector<std::string> tracks_;
  std::map<std::string, int> track_ids_;
};

// Times a scope into a trace (no-op when the trace is null).
class TraceScope {
 public:
  TraceScope(Trace* t, const char* name, int track, int64_t progress)
      : t_(t), name_(name), track_(track), progress_(progress), start_(t != nullptr ? t->now_us() : 0) {}
  ~TraceScope() {
    if (t_ != nullptr) t_->add(name_, track_, start_, progress_);
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Trace* t_;
  const char* name_;
  int track_;
  int64_t progress_;
  double start_;
};

}  // namespace ork
