// Writes GGUF v3 files: metadata first, then tensor infos, then every
// tensor's data on `general.alignment` (32 unless set otherwise).
//
// Data is produced per tensor by a callback when writing, so a multi-GiB
// synthetic model never has to exist in memory at once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/gguf/gguf.h"

namespace ork {

class GgufWriter {
 public:
  // Fills `out` (already sized to the tensor's byte count) with tensor i's data.
  using DataFn = std::function<void(size_t tensor_index, std::vector<uint8_t>& out)>;

  void set(const std::string& key, GgufValue value);
  // Drops a key set before (no-op if absent).
  void erase(const std::string& key);
  // Tensor of `type` with ne = dims (ne[0] contiguous). ne[0] must be a
  // multiple of the type's block size. `data` may be empty when a DataFn is
  // given to write().
  Status add_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> dims,
                    std::vector<uint8_t> data = {});

  // Writes to `path` via a temporary file renamed into place, so a failed
  // write never leaves a half-written model under the final name.
  Status write_file(const std::string& path, const DataFn& data_fn = nullptr) const;
  Result<std::vector<uint8_t>> write_memory(const DataFn& data_fn = nullptr) const;

  uint32_t alignment() const;

  size_t tensor_count() const { return tensors_.size(); }

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> dims;
    uint64_t bytes;
    std::vector<uint8_t> data;
  };
  Status write(const std::function<Status(const uint8_t*, size_t)>& sink, const DataFn& data_fn) const;

  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace ork
