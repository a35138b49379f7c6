// A quantized GGUF (what llama.cpp's users download) runs on ork's fast
// kernels through a converted orkpack: made once - its K-quants carried
// unchanged, everything else planned within the source's own bytes
// (quant/packer.h) - and kept in the cache directory (core/cache_dir.h),
// keyed by the source's identity (path, size, mtime, inode) and ork's
// format version, so the next start opens it directly.
//
// The conversion is made in memory and the model runs from it; the entry
// is saved in the background (cache_writer.h), atomically: a killed
// conversion or writer leaves no entry a later run would trust. An entry
// that fails to open is rebuilt. A cache that cannot be written
// (read-only, full) is a warning: the model runs from memory, and nothing
// is kept. A model that would not fit in memory twice over is converted
// into its entry on disk instead, and mapped from there.
#pragma once

#include <optional>
#include <string>

#include "core/mapped_file.h"
#include "ork/status.h"

namespace ork::cli {

struct ConvertOptions {
  bool convert = true;    // --no-convert: run a quantized GGUF as it is (reference kernels)
  bool use_cache = true;  // --no-cache: convert in a temporary, keep nothing
  // --npu PROFILE: a float GGUF is packed for that device (npu_plan.h) -
  // without it, nothing of a float GGUF is in a tier the NPU reads.
  std::string npu_profile;
};

struct ResolvedModel {
  std::string path;        // what to load (or, with an image, what it stands for)
  bool temporary = false;  // remove once loaded
  bool cached = false;     // a cache entry made by an earlier run
  std::optional<MappedFile> image;  // the conversion, in memory: load this
};

// The file to load for `path`: `path` itself unless it is a quantized GGUF
// to convert, or a float one to pack for an NPU (options.npu_profile).
// Notes and warnings go to stderr; conversion shows progress.
Result<ResolvedModel> resolve_model(const std::string& path, const ConvertOptions& options);

// A cached entry that failed to load (`why`): removed, and the source
// converted again.
Result<ResolvedModel> rebuild_damaged(const std::string& path, const ResolvedModel& damaged, const Status& why,
                                      const ConvertOptions& options);

// What a cache entry of `path` is made for: its real path, size,
// modification time, device and inode, ork's orkpack and conversion
// versions, and the NPU profile if any. An entry is named by its hash, and
// records it (cache_room.h) so a changed source's entry is known stale.
Result<std::string> source_identity(const std::string& path, const std::string& npu_profile);

// The cache entry a source maps to (for `ork cache` and tests); a pack for
// an NPU has its own, per profile.
Result<std::string> cache_entry_for(const std::string& path, const std::string& npu_profile = {});

}  // namespace ork::cli
