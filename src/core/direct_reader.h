// Reads ranges of a file past the page cache: O_DIRECT where the file
// system allows it (a plain read where it does not, e.g. tmpfs), so that
// what a process keeps of a large file is what it chose to keep - an expert
// cache - and not what the kernel happened to leave in its page cache,
// which a memory cgroup charges to the process and evicts without regard
// to what is needed next.
//
// O_DIRECT wants the offset, the length and the buffer aligned to the
// device's block; read() widens a range to kDirectAlign on both ends, so the
// destination must have room for aligned_span() bytes and be aligned itself.
// A short read (the file shrank) and an I/O error are errors naming the
// file, the offset and the length - never a crash, as a mapping's SIGBUS
// would be.
//
// Thread-safe: reads are pread()s on one descriptor.
#pragma once

#include <cstdint>
#include <string>

#include "ork/status.h"

namespace ork {

inline constexpr uint64_t kDirectAlign = 4096;

class DirectReader {
 public:
  DirectReader() = default;
  ~DirectReader();
  DirectReader(DirectReader&& other) noexcept;
  DirectReader& operator=(DirectReader&& other) noexcept;
  DirectReader(const DirectReader&) = delete;
  DirectReader& operator=(const DirectReader&) = delete;

  static Result<DirectReader> open(const std::string& path);

  // The aligned range that holds [offset, offset + bytes): where read()
  // starts and how much it reads.
  static uint64_t aligned_start(uint64_t offset) { return offset / kDirectAlign * kDirectAlign; }
  static uint64_t aligned_span(uint64_t offset, uint64_t bytes) {
    const uint64_t end = (offset + bytes + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
    return end - aligned_start(offset);
  }

  // Reads [aligned_start(offset), + aligned_span(offset, bytes)) into dst
  // (kDirectAlign-aligned); the byte at `offset` lands at
  // dst + (offset - aligned_start(offset)). Bytes past the end of the file
  // in the last block are left as they were; bytes of [offset, offset +
  // bytes) past it are an error.
  Status read(uint64_t offset, uint64_t bytes, uint8_t* dst) const;

  const std::string& path() const { return path_; }
  bool direct() const { return direct_; }  // O_DIRECT in use

 private:
  int fd_ = -1;
  bool direct_ = false;
  std::string path_;
};

}  // namespace ork
