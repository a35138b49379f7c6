// What vnpu records in the run's trace (core/trace.h): each session's DMA
// pushes and pop waits, compute sections, fences, flushes and mappings,
// and the host's submissions, on the tracks "vnpu session N" and "vnpu host".
#pragma once

#include <string>

#include "core/trace.h"

namespace ork::npu {

enum class TraceKind { kDmaPush, kDmaWait, kCompute, kFence, kFlush, kMap, kUnmap, kSubmit };
const char* trace_kind_name(TraceKind kind);

// The track of a session (-1: the host side).
inline int session_track(Trace* t, int session) {
  return t == nullptr ? 0 : t->track(session < 0 ? std::string("vnpu host") : "vnpu session " + std::to_string(session));
}

// Times a scope of a session into the trace (no-op when the trace is null).
class NpuTraceScope {
 public:
  NpuTraceScope(Trace* t, TraceKind kind, int session, int64_t progress)
      : scope_(t, trace_kind_name(kind), session_track(t, session), progress) {}

 private:
  TraceScope scope_;
};

}  // namespace ork::npu
