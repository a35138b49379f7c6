#include "engines/npu/profile.h"

#include <cstdlib>
#include <sstream>

namespace ork::npu {
namespace {

constexpr const char* kBuiltin =
#include "npu_profiles.inc"
    ;

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

Result<std::vector<DeviceProfile>> parse_profiles(const std::string& text, const std::string& source) {
  std::vector<DeviceProfile> out;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    const size_t hash = raw.find('#');
    const std::string s = trim(hash == std::string::npos ? raw : raw.substr(0, hash));
    if (s.empty()) continue;
    if (s.front() == '[') {
      if (s.back() != ']' || s.size() < 3) return error(StatusCode::kInvalidArgument, "{}:{}: bad section '{}'", source, line, s);
      out.emplace_back().name = s.substr(1, s.size() - 2);
      continue;
    }
    const size_t eq = s.find('=');
    if (eq == std::string::npos) return error(StatusCode::kInvalidArgument, "{}:{}: expected 'key = value'", source, line);
    if (out.empty()) return error(StatusCode::kInvalidArgument, "{}:{}: a key before any [profile]", source, line);
    const std::string key = trim(s.substr(0, eq)), value = trim(s.substr(eq + 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || end == nullptr || *end != '\0' || !(v >= 0)) {
      return error(StatusCode::kInvalidArgument, "{}:{}: '{}' is not a non-negative number", source, line, value);
    }
    DeviceProfile& p = out.back();
    if (key == "cores") p.cores = static_cast<int>(v);
    else if (key == "workers") p.workers = static_cast<int>(v);
    else if (key == "vtcm_bytes") p.vtcm_bytes = static_cast<int64_t>(v);
    else if (key == "int8_tops") p.int8_tops = v;
    else if (key == "int4_tops") p.int4_tops = v;
    else if (key == "dma_gbps") p.dma_gbps = v;
    else if (key == "submit_blocking_us") p.submit_blocking_us = v;
    else if (key == "submit_doorbell_us") p.submit_doorbell_us = v;
    else if (key == "map_us") p.map_us = v;
    else if (key == "window_bytes") p.window_bytes = static_cast<int64_t>(v);
    else if (key == "host_int8_tiles") p.host_int8_tiles = v != 0;
    else if (key == "cpu_gbps") p.cpu_gbps = v;
    else return error(StatusCode::kInvalidArgument, "{}:{}: unknown key '{}'", source, line, key);
  }
  for (const DeviceProfile& p : out) {
    if (p.cores < 1 || p.workers < 1 || p.vtcm_bytes < 4096 || p.int8_tops <= 0 || p.dma_gbps <= 0 || p.window_bytes <= 0) {
      return error(StatusCode::kInvalidArgument,
                   "{}: profile '{}' lacks cores, workers, vtcm_bytes, int8_tops, dma_gbps or window_bytes", source, p.name);
    }
  }
  return out;
}

const std::vector<DeviceProfile>& builtin_profiles() {
  static const std::vector<DeviceProfile> profiles = [] {
    auto p = parse_profiles(kBuiltin, "data/npu_profiles.txt");
    return p.is_ok() ? *p : std::vector<DeviceProfile>{};
  }();
  return profiles;
}

Result<DeviceProfile> find_profile(const std::string& name) {
  std::string names;
  for (const DeviceProfile& p : builtin_profiles()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  return error(StatusCode::kNotFound, "no vnpu profile '{}' (profiles: {})", name, names);
}

}  // namespace ork::npu
