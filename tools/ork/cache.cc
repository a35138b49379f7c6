// ork cache: what ork keeps in its cache directory (core/cache_dir.h) -
// converted models and performance models - listed and removed.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cache_room.h"
#include "commands.h"
#include "core/cache_dir.h"
#include "core/escape.h"
#include "format/orkpack/orkpack.h"

namespace ork::cli {
namespace {

struct Entry {
  std::string name;
  uint64_t bytes = 0;
  std::string what;
};

bool ends_with(const std::string& s, const char* tail) {
  const size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// ork's own files in the directory: converted models, performance models,
// and the temporaries a killed conversion left (never trusted).
std::vector<Entry> entries(const std::string& dir) {
  std::vector<Entry> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    Entry entry{name, 0, ""};
    if (ends_with(name, ".orkpack") && name[0] != '.') {
      auto pack = open_entry_headers(dir + "/" + name);
      if (pack.is_ok()) {
        const GgufValue* source = pack->metadata().find("ork.pack.source");
        entry.what = "converted from " + (source != nullptr && source->type == GgufValueType::kString ? source->string_value : "?");
        const EntryState state = entry_state(*pack);
        if (state == EntryState::kStale) entry.what += std::string(" (") + entry_state_name(state) + "; removed at the next conversion)";
      } else {
        entry.what = "damaged (rebuilt on next use)";
      }
    } else if (name.rfind("calibration-", 0) == 0 && ends_with(name, ".json")) {
      entry.what = "performance model (ork calibrate)";
    } else if (name[0] == '.' && name.find(".orkpack.ork-") != std::string::npos) {
      entry.what = "partial conversion (interrupted; never used)";
    } else {
      continue;
    }
    struct stat st {};
    if (::stat((dir + "/" + name).c_str(), &st) == 0) entry.bytes = static_cast<uint64_t>(st.st_size);
    out.push_back(std::move(entry));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return out;
}

int cache_ls() {
  const std::string dir = cache_dir();
  const std::vector<Entry> all = entries(dir);
  std::printf("cache directory %s (ORK_CACHE_DIR, XDG_CACHE_HOME or ~/.cache/ork)\n", dir.c_str());
  uint64_t total = 0;
  for (const Entry& e : all) {
    std::printf("%10.1f MiB  %s  %s\n", static_cast<double>(e.bytes) / (1 << 20), escape_text(e.name).c_str(),
                escape_text(e.what).c_str());
    total += e.bytes;
  }
  std::printf("%zu entries, %.1f MiB\n", all.size(), static_cast<double>(total) / (1 << 20));
  std::printf("a new conversion removes stale entries, then the least recently used while the cache is over "
              "ORK_CACHE_MAX or the disk would keep less than ORK_CACHE_MIN_FREE (default 5%%, at least 1 GiB) free\n");
  return 0;
}

int cache_rm(const std::vector<std::string>& names) {
  const std::string dir = cache_dir();
  const std::vector<Entry> all = entries(dir);
  int status = 0;
  size_t removed = 0;
  for (const std::string& want : names) {
    if (std::none_of(all.begin(), all.end(), [&](const Entry& e) { return e.name == want; })) {
      std::fprintf(stderr, "ork: cache rm: no entry '%s' in %s (see `ork cache ls`)\n", escape_text(want).c_str(), dir.c_str());
      status = 1;
    }
  }
  if (status != 0) return status;
  for (const Entry& e : all) {
    if (!names.empty() && std::find(names.begin(), names.end(), e.name) == names.end()) continue;
    const std::string path = dir + "/" + e.name;
    if (::unlink(path.c_str()) != 0) {
      std::fprintf(stderr, "ork: cache rm: %s: %s\n", escape_text(path).c_str(), std::strerror(errno));
      status = 1;
      continue;
    }
    ++removed;
  }
  std::fprintf(stderr, "ork: removed %zu entries from %s\n", removed, dir.c_str());
  return status;
}

}  // namespace

Runner add_cache(CLI::App& app) {
  auto names = std::make_shared<std::vector<std::string>>();
  app.require_subcommand(1);
  app.footer(
      "The directory: $ORK_CACHE_DIR, else $XDG_CACHE_HOME/ork, else ~/.cache/ork. A new conversion first removes the "
      "entries whose source changed or is gone, then the least recently used while the cache is over $ORK_CACHE_MAX "
      "(e.g. 40G; unset: no cap) or the disk would keep less than $ORK_CACHE_MIN_FREE free (default 5 %, at least "
      "1 GiB); with no room even so, the model runs from memory and nothing is kept.");
  CLI::App* ls = app.add_subcommand("ls", "List converted models and performance models in the cache directory");
  CLI::App* rm = app.add_subcommand("rm", "Remove cache entries: the ones named, or all of them");
  rm->add_option("names", *names, "Entries as `ork cache ls` names them (default: every entry)");
  return [ls, rm, names] {
    if (ls->parsed()) return cache_ls();
    if (rm->parsed()) return cache_rm(*names);
    return 2;
  };
}

}  // namespace ork::cli
