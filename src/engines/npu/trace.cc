#include "engines/npu/trace.h"

#include <fmt/format.h>

#include "core/output_file.h"

namespace ork::npu {

const char* trace_kind_name(TraceKind kind) {
  switch (kind) {
    case TraceKind::kDmaPush: return "dma_push";
    case TraceKind::kDmaWait: return "dma_wait";
    case TraceKind::kCompute: return "compute";
    case TraceKind::kFence: return "fence";
    case TraceKind::kFlush: return "flush";
    case TraceKind::kMap: return "map";
    case TraceKind::kUnmap: return "unmap";
    case TraceKind::kSubmit: return "submit";
  }
  return "?";
}

Status Trace::write_json(const std::string& path) const {
  std::string out = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  out += R"(  {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "vnpu"}})";
  const std::vector<TraceEvent> ev = events();
  int max_session = -1;
  for (const TraceEvent& e : ev) max_session = std::max(max_session, e.session);
  for (int s = -1; s <= max_session; ++s) {
    out += fmt::format(",\n  {{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": {}, \"args\": {{\"name\": \"{}\"}}}}",
                       s + 1, s < 0 ? std::string("host") : fmt::format("session {}", s));
  }
  for (const TraceEvent& e : ev) {
    out += fmt::format(
        ",\n  {{\"name\": \"{}\", \"cat\": \"vnpu\", \"ph\": \"X\", \"pid\": 1, \"tid\": {}, \"ts\": {:.3f}, \"dur\": {:.3f}, "
        "\"args\": {{\"progress\": {}}}}}",
        trace_kind_name(e.kind), e.session + 1, e.start_us, e.dur_us, e.progress);
  }
  out += "\n]}\n";
  return write_file_atomically(path, out);
}

}  // namespace ork::npu
