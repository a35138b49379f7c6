// An orkpack built in memory (a quantized GGUF converted on load): every
// tensor's place is fixed up front from its spec, the producers write its
// planes and scales straight into it (in parallel, in any order), and the
// finished image is the file - resident, on huge pages - so the model runs
// from it without a copy or a read, and it can be saved to disk as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "format/orkpack/orkpack.h"
#include "ork/status.h"

namespace ork {

class OrkpackImage {
 public:
  // `metadata` as for OrkpackWriter::create; `specs` every tensor, in file order.
  static Result<OrkpackImage> create(std::string name, const std::vector<uint8_t>& metadata,
                                     std::vector<OrkpackTensorSpec> specs);

  // Where tensor i's planes (tier_data_bytes) and row scales (null for the
  // float and carried tiers) go. The memory starts zeroed.
  uint8_t* data(size_t i) const { return image_.data() + entries_[i].data_offset + data_start_; }
  float* scales(size_t i) const;
  // Tensor i's pack-time error (OrkpackTensorSpec::error).
  void set_error(size_t i, float error) { entries_[i].spec.error = error; }

  size_t size() const { return size_; }
  // Writes the directory and header; the image as a resident file named `name`.
  MappedFile finish() &&;

 private:
  HugePages image_;
  std::string name_;
  size_t size_ = 0;
  uint64_t metadata_size_ = 0, data_start_ = 0, data_size_ = 0, dir_offset_ = 0;
  std::vector<OrkpackTensor> entries_;
};

}  // namespace ork
