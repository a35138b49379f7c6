#include "model_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include <fmt/format.h>

#include "cache_room.h"
#include "cache_writer.h"
#include "npu_plan.h"
#include "core/cache_dir.h"
#include "format/gguf/gguf.h"
#include "format/orkpack/orkpack.h"
#include "quant/carry.h"
#include "quant/packer.h"
#include "text_input.h"

namespace ork::cli {
namespace {

// Bumped whenever a conversion of the same source would come out different.
constexpr int kConversionVersion = 4;  // 3: Q3_K carried (q3k); 4: Q2_K (q2k)

std::string stem_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".gguf") == 0) base.resize(base.size() - 5);
  return base;
}

Status make_dirs(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    const std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return error(StatusCode::kIo, "cannot create {}: {}", part, std::strerror(errno));
    }
  }
  return Status::ok();
}

Result<PackReport> convert(const std::string& source, const std::string& output, const std::string& npu_profile,
                           MappedFile* in_memory = nullptr) {
  PackOptions o;
  o.input = source;
  // Every conversion records what it was made from: a cache entry whose
  // source changes later is known to be stale (cache_room.h).
  char real[PATH_MAX];
  auto identity = source_identity(source, npu_profile);
  if (identity.is_ok() && ::realpath(source.c_str(), real) != nullptr) {
    o.extra_metadata = entry_identity_metadata(*identity, real, npu_profile);
  }
  o.output = output;
  o.in_memory = in_memory;
  o.budget_is_default = true;
  if (npu_profile.empty()) {
    o.source_budget = true;  // a quantized source keeps its size
  } else {
    o.bpw = 4.5;  // ork pack's default for a float source
    ORK_RETURN_IF_ERROR(plan_for_npu(npu_profile, o));
  }
  o.warn = [](const std::string& m) { std::fprintf(stderr, "ork: warning: %s\n", m.c_str()); };
  return pack_model(o, [](int phase, size_t done, size_t total, const std::string&) {
    progress_bar(phase == 0 ? "plan" : "convert", static_cast<int>(done + 1), static_cast<int>(total));
  });
}

}  // namespace

Result<std::string> source_identity(const std::string& path, const std::string& npu_profile) {
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr) return error(StatusCode::kIo, "{}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::stat(real, &st) != 0) return error(StatusCode::kIo, "{}: {}", path, std::strerror(errno));
  return fmt::format("{}|{}|{}.{}|{}:{}|orkpack {}|conversion {}", real, static_cast<long long>(st.st_size),
                     static_cast<long long>(st.st_mtim.tv_sec), static_cast<long long>(st.st_mtim.tv_nsec),
                     static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino),
                     kOrkpackVersion, kConversionVersion) +
         (npu_profile.empty() ? "" : "|npu " + npu_profile);
}

Result<std::string> cache_entry_for(const std::string& path, const std::string& npu_profile) {
  ORK_ASSIGN_OR_RETURN(const std::string identity, source_identity(path, npu_profile));
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr) return error(StatusCode::kIo, "{}: {}", path, std::strerror(errno));
  return fmt::format("{}/{}{}-{:016x}.orkpack", cache_dir(), stem_of(real), npu_profile.empty() ? "" : "-" + npu_profile,
                     std::hash<std::string>{}(identity));
}

Result<ResolvedModel> resolve_model(const std::string& path, const ConvertOptions& options) {
  ResolvedModel plain{path, false};
  if (!options.convert || OrkpackFile::sniff_file(path)) return plain;
  auto gguf = GgufFile::open(path);
  if (!gguf.is_ok()) return plain;  // the loader reports what is wrong
  // A float source runs as it is - unless it is to run beside an NPU,
  // which reads none of its tensors: then it is packed for the device.
  const bool quantized = quantized_source(*gguf);
  const std::string npu = quantized ? std::string() : options.npu_profile;
  if (!quantized && npu.empty()) return plain;
  const char* as_it_is = npu.empty() ? "on the reference kernels (slow)" : "as it is (nothing on the NPU)";

  std::string entry;
  if (options.use_cache) {
    ORK_ASSIGN_OR_RETURN(entry, cache_entry_for(path, npu));
    // An entry is opened (and so validated) once, by the loader: one that
    // fails comes back through rebuild_damaged().
    if (::access(entry.c_str(), F_OK) == 0) {
      std::fprintf(stderr, "ork: %s runs from its converted copy %s\n", path.c_str(), entry.c_str());
      mark_used(entry);
      return ResolvedModel{entry, false, true};
    }
    if (Status made = make_dirs(cache_dir()); !made.is_ok()) {
      std::fprintf(stderr, "ork: warning: %s; converting into a temporary file instead\n", made.message().c_str());
      entry.clear();
    }
  }
  if (!entry.empty()) {
    // Room for the entry before the work: a quantized source converts to
    // about its own size, a float one for an NPU to 4.5 bits a weight.
    uint64_t elems = 0;
    for (const GgufTensorInfo& t : gguf->tensors()) elems += t.elems;
    const uint64_t estimate = quantized ? gguf->file_size() : elems * 9 / 16;
    const Status room = make_room(entry, estimate);
    if (room.code() == StatusCode::kInvalidArgument) return room;
    if (!room.is_ok()) {
      std::fprintf(stderr, "ork: warning: the conversion will not be kept: %s\n", room.message().c_str());
      entry.clear();
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto say_converting = [&](bool kept) {
    const std::string once = kept ? fmt::format(" (once: kept as {})", entry) : std::string();
    if (npu.empty()) {
      std::fprintf(stderr, "ork: converting %s for the fast kernels%s\n", path.c_str(), once.c_str());
    } else {
      std::fprintf(stderr, "ork: packing %s for %s's NPU at 4.5 bits per weight, not calibrated%s; `ork pack %s --npu %s` "
                   "calibrates (and takes --bpw)\n", path.c_str(), npu.c_str(), once.c_str(), path.c_str(), npu.c_str());
    }
  };
  // In memory (the model runs from the conversion itself, and the entry is
  // saved in the background), unless two copies would not fit: then into
  // the entry on disk, mapped from there.
  const uint64_t source_bytes = gguf->file_size();
  if (MappedFile::resident_fits(2 * source_bytes)) {
    if (!entry.empty()) clear_stale_temporaries(entry);
    say_converting(!entry.empty());
    ResolvedModel out{entry.empty() ? path + " (converted in memory)" : entry, false, false, MappedFile()};
    auto report = convert(path, out.path, npu, &*out.image);
    if (!report.is_ok()) {
      if (report.status().code() != StatusCode::kResourceExhausted) return report.status();
      std::fprintf(stderr, "ork: warning: cannot convert (%s); running %s %s\n", report.status().message().c_str(),
                   path.c_str(), as_it_is);
      return plain;
    }
    std::fprintf(stderr, "ork: converted in %.1f s: %.3f bits per weight\n", seconds(), report->bpw());
    if (!entry.empty()) {
      const Status saving = save_detached(*out.image, entry);
      if (!saving.is_ok()) {
        std::fprintf(stderr, "ork: warning: cannot keep the conversion (%s); it runs from memory this time\n",
                     saving.message().c_str());
      }
    }
    return out;
  }
  if (!entry.empty()) {
    say_converting(true);
    auto report = convert(path, entry, npu);
    if (report.is_ok()) {
      std::fprintf(stderr, "ork: converted in %.1f s: %.3f bits per weight\n", seconds(), report->bpw());
      return ResolvedModel{entry, false};
    }
    if (report.status().code() != StatusCode::kIo) return report.status();
    std::fprintf(stderr, "ork: warning: cannot keep the conversion (%s); converting into a temporary file instead\n",
                 report.status().message().c_str());
  }
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string tmp = fmt::format("{}/ork-convert-{}-{}.orkpack", tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp",
                                      stem_of(path), static_cast<long long>(::getpid()));
  say_converting(false);
  auto report = convert(path, tmp, npu);
  if (report.is_ok()) return ResolvedModel{tmp, true};
  if (report.status().code() != StatusCode::kIo) return report.status();
  std::fprintf(stderr, "ork: warning: cannot convert (%s); running %s %s\n", report.status().message().c_str(),
               path.c_str(), as_it_is);
  return plain;
}

Result<ResolvedModel> rebuild_damaged(const std::string& path, const ResolvedModel& damaged, const Status& why,
                                      const ConvertOptions& options) {
  std::fprintf(stderr, "ork: warning: the cached conversion %s is damaged (%s); converting again\n", damaged.path.c_str(),
               why.message().c_str());
  ::unlink(damaged.path.c_str());
  return resolve_model(path, options);
}

}  // namespace ork::cli
