// Every file ork writes goes through OutputFile, so that no failure, kill
// or planted link can cost a user a file:
//   - the data goes to a temporary created exclusively beside the target
//     (mkstemp: O_CREAT|O_EXCL, so never through an existing name or link),
//   - commit() flushes it to disk (fsync), renames it over the target and
//     syncs the directory, so the target is the old file or the whole new
//     one, never a part;
//   - until then the target is untouched, and the temporary is removed by
//     the destructor, on any error, and on SIGINT, SIGTERM or SIGHUP.
// A target that exists and is not a regular file (/dev/null, a FIFO) is
// written in place: renaming over it would replace the node itself.
//
// Not thread-safe: one thread writes one OutputFile.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "ork/status.h"

namespace ork {

class OutputFile {
 public:
  // `seekable`: the writer rewrites earlier bytes (write_at); a target that
  // cannot be (a FIFO) is refused with a message saying so.
  static Result<OutputFile> create(const std::string& path, bool seekable = false);
  OutputFile() = default;
  ~OutputFile();
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  Status write(const void* data, size_t bytes);
  Status write(std::string_view text) { return write(text.data(), text.size()); }
  // Overwrites bytes already written (a header filled in last).
  Status write_at(uint64_t offset, const void* data, size_t bytes);
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Makes the file the target's contents, durably. After an error the
  // target is unchanged and the temporary gone.
  Status commit();

 private:
  Status flush();
  void discard();

  int fd_ = -1;
  int tmp_slot_ = -1;  // its slot in the signal handler's table, or -1
  std::string path_, tmp_;
  bool in_place_ = false;
  uint64_t size_ = 0;
  std::vector<uint8_t> buffer_;
};

// Writes `contents` to `path` through an OutputFile.
Status write_file_atomically(const std::string& path, std::string_view contents);

// What a command checks before its first byte of work: `path` can be
// written (its directory exists and is writable; it is not a directory)
// and it is none of `inputs` (same file by device and inode, through links
// too). `what` names the option in messages ("-o").
Status check_output_path(const std::string& path, std::initializer_list<std::string> inputs, const char* what = "-o");

}  // namespace ork
