// Device-side trace events (DESIGN section 6): every DMA push and pop wait, compute
// section, fence, flush and map/unmap of a vnpu session becomes a complete
// event with a small progress integer (the tile, sequence number or mapping
// count it concerns). write_json() emits the Chrome trace-event format,
// which Perfetto's UI and chrome://tracing load.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "ork/status.h"

namespace ork::npu {

enum class TraceKind { kDmaPush, kDmaWait, kCompute, kFence, kFlush, kMap, kUnmap, kSubmit };
const char* trace_kind_name(TraceKind kind);

struct TraceEvent {
  TraceKind kind;
  int session = 0;       // -1: the host
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
  void add(TraceKind kind, int session, double start_us, int64_t progress) {
    const double end = now_us();
    std::lock_guard lock(mu_);
    events_.push_back({kind, session, start_us, end - start_us, progress});
  }
  std::vector<TraceEvent> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }
  Status write_json(const std::string& path) const;

 private:
  std::chrono::steady_clock::time_point t0_;
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
};

// Times a scope into a trace (no-op when the trace is null).
class TraceScope {
 public:
  TraceScope(Trace* t, TraceKind kind, int session, int64_t progress)
      : t_(t), kind_(kind), session_(session), progress_(progress), start_(t != nullptr ? t->now_us() : 0) {}
  ~TraceScope() {
    if (t_ != nullptr) t_->add(kind_, session_, start_, progress_);
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Trace* t_;
  TraceKind kind_;
  int session_;
  int64_t progress_;
  double start_;
};

}  // namespace ork::npu
