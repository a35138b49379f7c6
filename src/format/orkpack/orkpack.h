// orkpack: ork's tiered per-channel weight file (docs/FORMAT.md).
//
// OrkpackFile::open() validates the header, every section bound and every
// directory entry (tier, layout, shape, plane and scale ranges) before
// handing anything out; a file that passes can be read without checks.
// OrkpackWriter streams: tensors are appended one at a time, so packing
// needs memory for one tensor, not the model.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "format/gguf/gguf.h"
#include "core/output_file.h"
#include "ork/status.h"
#include "quant/tier.h"

namespace ork {

// Version 2 lets a tensor keep its per-row scales in f16 (scales_size rows
// x 2) where every one of them is an f16 value; version 1 files (always
// rows x 4, f32) are still read.
inline constexpr uint32_t kOrkpackVersion = 2;
inline constexpr uint32_t kOrkpackOldestVersion = 1;
inline constexpr uint64_t kOrkpackAlign = 128;   // every plane and scale array
inline constexpr uint64_t kOrkpackPage = 4096;   // start of the data section

enum class OrkLayout : uint32_t { kRowMajor = 0 };
inline constexpr uint32_t kOrkLayoutCount = 1;

// Where and how one tensor is stored.
struct OrkpackTensorSpec {
  std::string name;
  Tier tier = Tier::kF32;
  OrkLayout layout = OrkLayout::kRowMajor;
  std::vector<uint64_t> dims;  // GGUF order, ne[0] = K
  int64_t k_stored = 0;
  uint32_t rotation_block = 0;  // 0: not rotated
  float error = 0.0f;           // importance-weighted relative error at pack time (NaN: unknown)

  int64_t rows() const;
};

struct OrkpackTensor {
  OrkpackTensorSpec spec;
  uint64_t data_offset = 0, data_size = 0, scales_offset = 0, scales_size = 0;  // as in the file
  // The file holds the scales as f16 (scales_size = rows x 2). OrkpackFile
  // widens them into memory of its own at open, so `scales` is f32 either
  // way - except for a tensor whose check was left to its reader, which
  // reads and widens them itself (scales then null).
  bool scales_f16 = false;
  const uint8_t* data = nullptr;   // into the mapping
  const float* scales = nullptr;   // null for float tiers

  TierTensor view() const { return {spec.tier, data, scales, spec.rows(), spec.k_stored}; }
  // Bytes it takes in memory once read: its scales as f32.
  uint64_t memory_bytes() const { return data_size + (scales_f16 ? 2 * scales_size : scales_size); }
};

class OrkpackFile {
 public:
  // Every tensor's values are checked (orkpack_check_values) unless
  // check_later(name) says its reader will check them when it reads them
  // (the experts an expert cache reads from disk).
  static Result<OrkpackFile> open(const std::string& path,
                                  MappedFile::Residency residency = MappedFile::Residency::kMapped,
                                  const std::function<bool(const std::string&)>& check_later = nullptr);
  static Result<OrkpackFile> parse(MappedFile file, const std::function<bool(const std::string&)>& check_later = nullptr);
  // True if the bytes start with the orkpack magic.
  static bool sniff(const uint8_t* data, size_t size);
  static bool sniff_file(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint64_t file_size() const { return file_size_; }
  // Read into memory (wholly, or all but what keep_on_disk() left there).
  bool resident() const { return file_.resident() || arena_.data() != nullptr; }
  uint32_t version() const { return version_; }
  // All metadata (the source GGUF's and ork's keys), as a tensorless GGUF.
  const GgufFile& metadata() const { return metadata_; }
  uint64_t rotation_seed() const;
  const std::vector<OrkpackTensor>& tensors() const { return tensors_; }
  const OrkpackTensor* find_tensor(const std::string& name) const;
  // Where the data section starts in the file: a tensor's bytes are at
  // data_section_offset() + data_offset (and + scales_offset).
  uint64_t data_section_offset() const { return data_section_offset_; }

  // Reads every tensor for which on_disk() is false into memory of its own
  // (huge pages) and gives up the file's mapping, dropping the file from
  // the page cache: the tensors kept on disk (a model's routed experts, read
  // on demand into an expert cache) then have null data and scales, and are
  // reached by their offsets alone. A mapped file only (else a no-op).
  Status keep_on_disk(const std::function<bool(const OrkpackTensor&)>& on_disk);
  // Bytes read into memory by keep_on_disk() (0 before it).
  uint64_t resident_bytes() const { return arena_bytes_; }

 private:
  MappedFile file_;
  uint64_t file_size_ = 0;
  uint64_t data_section_offset_ = 0;
  HugePages arena_;
  uint64_t arena_bytes_ = 0;
  uint32_t version_ = 0;
  GgufFile metadata_;
  std::vector<OrkpackTensor> tensors_;
  std::map<std::string, size_t> index_;
  HugePages widened_;  // the f16 scales, as f32
};

// Bytes a tensor's per-row scales take in a file: rows x 2 when every one
// is an f16 value (f16_scales_exact), else rows x 4.
bool f16_scales_exact(std::span<const float> scales);
inline uint64_t orkpack_scale_bytes(std::span<const float> scales) {
  return scales.size() * (f16_scales_exact(scales) ? 2 : 4);
}
// Widens n f16 scales at `from` (any alignment) into `to`.
void widen_f16_scales(const uint8_t* from, uint64_t n, float* to);

// A tensor's values that would make every output NaN - a scale or a float
// weight that is not finite, a carried block's scale that is not, or a
// sub-scale out of its kind's range - are an error naming the tensor.
Status orkpack_check_values(const OrkpackTensor& e);

// The directory and the 64-byte header as the file holds them (the
// writers' shared serialization).
std::vector<uint8_t> orkpack_directory(const std::vector<OrkpackTensor>& entries);
std::vector<uint8_t> orkpack_header(uint64_t metadata_size, uint64_t dir_offset, uint64_t dir_size, uint64_t data_start,
                                    uint64_t data_size);

class OrkpackWriter {
 public:
  OrkpackWriter() = default;
  OrkpackWriter(OrkpackWriter&& other) noexcept = default;
  OrkpackWriter& operator=(OrkpackWriter&&) = delete;

  // Starts `path` (an OutputFile: a temporary until finish() moves it into
  // place; dropped unfinished, it leaves nothing). `metadata` is a
  // tensorless GGUF stream holding every key (GgufWriter::write_memory()).
  static Result<OrkpackWriter> create(const std::string& path, const std::vector<uint8_t>& metadata);

  // Appends one tensor: `data` of tier_data_bytes(), `scales` of rows floats
  // for quantized tiers (empty for f16/f32), written as f16 when every one
  // is an f16 value (the scale search rounds them so), else as f32.
  Status add_tensor(const OrkpackTensorSpec& spec, std::span<const uint8_t> data, std::span<const float> scales);
  // Writes the directory and header and moves the file into place.
  Status finish();

  uint64_t bytes_written() const { return pos_; }

 private:
  Status write(const void* p, size_t n);
  Status pad_to(uint64_t alignment);

  OutputFile file_;
  uint64_t pos_ = 0;
  uint64_t metadata_size_ = 0;
  uint64_t data_start_ = 0;
  std::vector<OrkpackTensor> entries_;
};

}  // namespace ork
