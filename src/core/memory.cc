#include "core/memory.h"

#include <algorithm>
#include <fstream>
#include <string>

namespace ork {
namespace {

std::optional<uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    return std::stoull(text);
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<uint64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

// The cgroup's directory under `mount`. Inside a container the path the
// kernel reports may be longer than what is mounted (the mount is a
// subtree): drop leading components until the directory is there.
std::string cgroup_dir(const std::string& mount, std::string path, const std::string& probe) {
  for (;;) {
    const std::string dir = mount + path;
    if (std::ifstream(dir + "/" + probe)) return dir;
    if (path.empty() || path == "/") return mount;
    const size_t next = path.find('/', 1);
    path = next == std::string::npos ? std::string() : path.substr(next);
  }
}

// A key's value in a cgroup's memory.stat, or nullopt.
std::optional<uint64_t> stat_value(const std::string& path, const std::string& want) {
  std::ifstream in(path);
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == want) return value;
  }
  return std::nullopt;
}

// The room left under this process's memory cgroup: limit less usage, less
// the inactive page cache in it, which the kernel reclaims before it fails
// an allocation (a file read once - a mapped model's pages after a full
// pass - would otherwise count as memory taken).
std::optional<uint64_t> cgroup_room() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    // v1: "7:memory:/path"; v2: "0::/path".
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    std::optional<uint64_t> limit, usage, inactive;
    if (controllers == "memory") {
      const std::string dir = cgroup_dir("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes");
      limit = read_number(dir + "/memory.limit_in_bytes");
      usage = read_number(dir + "/memory.usage_in_bytes");
      inactive = stat_value(dir + "/memory.stat", "total_inactive_file");
    } else if (controllers.empty() && line.compare(0, 2, "0:") == 0) {
      const std::string dir = cgroup_dir("/sys/fs/cgroup", path, "memory.max");
      limit = read_number(dir + "/memory.max");
      usage = read_number(dir + "/memory.current");
      inactive = stat_value(dir + "/memory.stat", "inactive_file");
    }
    if (usage && inactive) *usage -= std::min(*usage, *inactive);
    // v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages).
    if (limit && usage && *limit < (uint64_t{1} << 60)) return *limit > *usage ? *limit - *usage : 0;
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> available_memory_bytes() {
  const std::optional<uint64_t> system = mem_available(), cgroup = cgroup_room();
  if (system && cgroup) return std::min(*system, *cgroup);
  return system ? system : cgroup;
}

}  // namespace ork
