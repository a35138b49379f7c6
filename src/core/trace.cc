#include "core/trace.h"

#include <fmt/format.h>

#include "core/output_file.h"

namespace ork {

int Trace::track(const std::string& name) {
  std::lock_guard lock(mu_);
  const auto it = track_ids_.find(name);
  if (it != track_ids_.end()) return it->second;
  const int id = static_cast<int>(tracks_.size());
  tracks_.push_back(name);
  track_ids_.emplace(name, id);
  return id;
}

Status Trace::write_json(const std::string& path) const {
  const std::vector<TraceEvent> ev = events();
  const std::vector<std::string> names = tracks();
  std::string out = "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n";
  out += R"(  {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "ork"}})";
  for (size_t t = 0; t < names.size(); ++t) {
    out += fmt::format(",\n  {{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": {}, \"args\": {{\"name\": \"{}\"}}}}",
                       t + 1, names[t]);
    // Tracks in the order they were made: cpu above dispatch above the device.
    out += fmt::format(",\n  {{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 1, \"tid\": {}, \"args\": {{\"sort_index\": {}}}}}",
                       t + 1, t);
  }
  for (const TraceEvent& e : ev) {
    out += fmt::format(
        ",\n  {{\"name\": \"{}\", \"ph\": \"X\", \"pid\": 1, \"tid\": {}, \"ts\": {:.3f}, \"dur\": {:.3f}, "
        "\"args\": {{\"progress\": {}}}}}",
        e.name, e.track + 1, e.start_us, e.dur_us, e.progress);
  }
  out += "\n]}\n";
  return write_file_atomically(path, out);
}

}  // namespace ork
