// A read-only view of a whole file, memory-mapped. Move-only; unmaps on
// destruction. Also holds an owned in-memory buffer, so code that parses a
// file (GGUF, orkpack) works the same on bytes built in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ork/status.h"

namespace ork {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static Result<MappedFile> open(const std::string& path);
  static MappedFile from_bytes(std::vector<uint8_t> bytes, std::string name);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::vector<uint8_t> owned_;
  std::string path_;
};

}  // namespace ork
