// A bounds-checked little-endian reader over bytes in memory, shared by the
// file-format parsers: every read either succeeds or fails with the byte
// offset and what was being read, so a truncated or hostile file gives a
// clear error instead of a crash.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "ork/status.h"

namespace ork {

class ByteCursor {
 public:
  ByteCursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  Status read(T* out, const char* what) {
    if (remaining() < sizeof(T)) {
      return error(StatusCode::kCorrupt, "truncated at byte {} reading {} ({} bytes needed, {} left)", pos_, what,
                   sizeof(T), remaining());
    }
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::ok();
  }

  // A u64 length followed by that many bytes, at most max_bytes.
  Status read_string(std::string* out, const char* what, uint64_t max_bytes) {
    uint64_t len = 0;
    ORK_RETURN_IF_ERROR(read(&len, what));
    if (len > remaining() || len > max_bytes) {
      return error(StatusCode::kCorrupt, "{} at byte {} claims {} bytes, only {} remain (at most {} allowed)", what,
                   pos_ - 8, len, remaining(), max_bytes);
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::ok();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace ork
