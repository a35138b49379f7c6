#include "cache_room.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "core/escape.h"
#include "model_cache.h"

namespace ork::cli {
namespace {

constexpr const char* kIdentityKey = "ork.cache.identity";
constexpr const char* kSourceKey = "ork.cache.source";
constexpr const char* kNpuKey = "ork.cache.npu";

std::string string_key(const GgufFile& meta, const char* key) {
  const GgufValue* v = meta.find(key);
  return v != nullptr && v->type == GgufValueType::kString ? v->string_value : std::string();
}

std::string size_text(uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  return b >= (1ull << 30) ? fmt::format("{:.1f} GiB", b / (1ull << 30)) : fmt::format("{:.1f} MiB", b / (1 << 20));
}

// A size in an environment variable, as --mem spells one: 8 or 8G (GiB),
// 1500M (MiB), 2T (TiB), 10% (of the disk, `disk` bytes). Unset: nullopt.
Result<std::optional<uint64_t>> size_from_env(const char* name, uint64_t disk) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::optional<uint64_t>();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  const std::string unit = end != nullptr ? end : "";
  double bytes = -1;
  if (end != text && errno == 0 && v >= 0 && std::isfinite(v)) {
    if (unit.empty() || unit == "G" || unit == "GiB") bytes = v * (1ull << 30);
    if (unit == "K" || unit == "KiB") bytes = v * (1ull << 10);
    if (unit == "M" || unit == "MiB") bytes = v * (1ull << 20);
    if (unit == "T" || unit == "TiB") bytes = v * (1ull << 40);
    if (unit == "%" && v <= 100) bytes = static_cast<double>(disk) * v / 100.0;
  }
  if (bytes < 0 || bytes > 1e18) {
    return error(StatusCode::kInvalidArgument, "{}={}: expected a size such as 20 or 20G (GiB), 500M (MiB), 1T (TiB), 64K (KiB) or 10% "
                 "(of the disk)", name, escape_text(text));
  }
  return std::optional<uint64_t>(static_cast<uint64_t>(bytes));
}

struct Converted {
  std::string path, name;
  uint64_t bytes = 0;
  timespec used{};
  EntryState state = EntryState::kUnknown;
};

// The converted models in `dir` (not the performance models, not a
// writer's temporaries), each with its state; damaged ones count as stale.
std::vector<Converted> converted_in(const std::string& dir) {
  std::vector<Converted> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name[0] == '.' || name.size() < 8 || name.compare(name.size() - 8, 8, ".orkpack") != 0) continue;
    Converted c{dir + "/" + name, name};
    struct stat st {};
    if (::stat(c.path.c_str(), &st) != 0) continue;
    c.bytes = static_cast<uint64_t>(st.st_size);
    c.used = st.st_mtim;  // set at each use (mark_used); reads of the header leave it
    auto pack = open_entry_headers(c.path);
    c.state = pack.is_ok() ? entry_state(*pack) : EntryState::kStale;
    out.push_back(std::move(c));
  }
  ::closedir(d);
  return out;
}

bool remove_entry(const Converted& c, const char* why) {
  if (::unlink(c.path.c_str()) != 0) return false;
  std::fprintf(stderr, "ork: cache: removed %s (%s): %s\n", escape_text(c.name).c_str(), size_text(c.bytes).c_str(), why);
  return true;
}

}  // namespace

Result<OrkpackFile> open_entry_headers(const std::string& path) {
  return OrkpackFile::open(path, MappedFile::Residency::kMapped, [](const std::string&) { return true; });
}

std::vector<std::pair<std::string, std::string>> entry_identity_metadata(const std::string& identity,
                                                                         const std::string& source_realpath,
                                                                         const std::string& npu_profile) {
  return {{kIdentityKey, identity}, {kSourceKey, source_realpath}, {kNpuKey, npu_profile}};
}

EntryState entry_state(const OrkpackFile& entry) {
  const std::string identity = string_key(entry.metadata(), kIdentityKey);
  if (identity.empty()) return EntryState::kUnknown;
  auto now = source_identity(string_key(entry.metadata(), kSourceKey), string_key(entry.metadata(), kNpuKey));
  return now.is_ok() && *now == identity ? EntryState::kCurrent : EntryState::kStale;
}

const char* entry_state_name(EntryState s) {
  switch (s) {
    case EntryState::kCurrent: return "current";
    case EntryState::kStale: return "stale: its source changed or is gone";
    case EntryState::kUnknown: return "source not recorded";
  }
  return "?";
}

Status make_room(const std::string& entry, uint64_t bytes) {
  const size_t slash = entry.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : entry.substr(0, slash);
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return Status::ok();  // the writer reports what is wrong
  const uint64_t disk = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
  ORK_ASSIGN_OR_RETURN(const std::optional<uint64_t> cap, size_from_env("ORK_CACHE_MAX", disk));
  ORK_ASSIGN_OR_RETURN(const std::optional<uint64_t> min_free_set, size_from_env("ORK_CACHE_MIN_FREE", disk));
  const uint64_t min_free = min_free_set.value_or(std::max<uint64_t>(uint64_t{1} << 30, disk / 20));

  std::vector<Converted> all = converted_in(dir);
  all.erase(std::remove_if(all.begin(), all.end(), [&](const Converted& c) { return c.path == entry; }), all.end());
  // What can never be opened again goes first, whatever the room.
  uint64_t freed = 0;
  std::vector<Converted> live;
  for (const Converted& c : all) {
    if (c.state == EntryState::kStale && remove_entry(c, "its source changed or is gone")) {
      freed += c.bytes;
    } else {
      live.push_back(c);
    }
  }
  uint64_t kept = 0;
  for (const Converted& c : live) kept += c.bytes;
  const uint64_t avail = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize + freed;
  // Bytes that must go: over the cap, and short of the disk's reserve.
  auto short_by = [&](uint64_t removed) {
    uint64_t need = 0;
    if (cap && kept - removed + bytes > *cap) need = kept - removed + bytes - *cap;
    const uint64_t free_after = avail + removed;
    if (free_after < bytes + min_free) need = std::max(need, bytes + min_free - free_after);
    return need;
  };
  if (short_by(0) == 0) return Status::ok();
  if (short_by(kept) > 0) {
    const std::string why =
        cap && bytes > *cap
            ? fmt::format("it is {} and ORK_CACHE_MAX is {}", size_text(bytes), size_text(*cap))
            : fmt::format("{} would leave the disk with less than {} free (ORK_CACHE_MIN_FREE) even without the {} "
                          "entries kept there ({})", size_text(bytes), size_text(min_free), live.size(), size_text(kept));
    return error(StatusCode::kResourceExhausted, "no room in the cache {}: {}", dir, why);
  }
  // Least recently used first.
  std::sort(live.begin(), live.end(), [](const Converted& a, const Converted& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec : a.used.tv_nsec < b.used.tv_nsec;
  });
  uint64_t removed = 0;
  for (const Converted& c : live) {
    if (short_by(removed) == 0) break;
    if (remove_entry(c, "the least recently used, to make room (ORK_CACHE_MAX, ORK_CACHE_MIN_FREE)")) removed += c.bytes;
  }
  if (short_by(removed) > 0) return error(StatusCode::kResourceExhausted, "no room in the cache {}", dir);
  return Status::ok();
}

void mark_used(const std::string& entry) {
  const timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  (void)::utimensat(AT_FDCWD, entry.c_str(), times, 0);
}

}  // namespace ork::cli
