#include "core/direct_reader.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

namespace ork {

DirectReader::~DirectReader() {
  if (fd_ >= 0) ::close(fd_);
}

DirectReader::DirectReader(DirectReader&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), direct_(other.direct_), path_(std::move(other.path_)) {}

DirectReader& DirectReader::operator=(DirectReader&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    direct_ = other.direct_;
    path_ = std::move(other.path_);
  }
  return *this;
}

Result<DirectReader> DirectReader::open(const std::string& path) {
  DirectReader r;
  r.path_ = path;
  r.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  r.direct_ = r.fd_ >= 0;
  // tmpfs and some overlay file systems refuse O_DIRECT: read through the
  // page cache there (and tell the caller, which says so in its stats).
  if (r.fd_ < 0 && errno == EINVAL) r.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (r.fd_ < 0) return error(StatusCode::kIo, "{}: cannot open for reading: {}", path, std::strerror(errno));
  return r;
}

Status DirectReader::read(uint64_t offset, uint64_t bytes, uint8_t* dst) const {
  const uint64_t start = aligned_start(offset);
  const uint64_t span = aligned_span(offset, bytes);
  const uint64_t need = offset + bytes - start;  // bytes that must arrive
  uint64_t done = 0;
  while (done < span) {
    const ssize_t got = ::pread(fd_, dst + done, static_cast<size_t>(span - done), static_cast<off_t>(start + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return error(StatusCode::kIo, "{}: reading {} bytes at offset {}: {}", path_, bytes, offset, std::strerror(errno));
    }
    if (got == 0) break;  // end of file
    done += static_cast<uint64_t>(got);
  }
  if (done < need) {
    return error(StatusCode::kIo, "{}: reading {} bytes at offset {}: the file ends {} bytes early (it shrank?)", path_,
                 bytes, offset, need - done);
  }
  return Status::ok();
}

}  // namespace ork
