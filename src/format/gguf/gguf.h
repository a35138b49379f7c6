// GGUF: llama.cpp's model file format, versions 2 and 3.
//
// Layout: magic "GGUF", version u32, tensor count u64, metadata count u64,
// metadata key/values, tensor infos (name, dims, type, offset), padding to
// `general.alignment` (default 32), then tensor data. Little-endian only.
//
// GgufFile::open() validates everything it will later hand out: every
// count against the bytes that remain, every string, every tensor's type,
// shape and data range. A file that passes can be read without further
// checks; a file that fails gives a Status naming the file and the field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "format/gguf/ggml_type.h"
#include "ork/status.h"

namespace ork {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
inline constexpr uint32_t kGgufValueTypeCount = 13;

const char* gguf_value_type_name(GgufValueType type);

// One metadata value. Scalars use one of the scalar fields; arrays keep
// their elements in the vector that fits the element type (integers and
// bools in `ints`, floats in `floats`, strings in `strings`, nested arrays
// in `arrays`), so a 150k-entry vocabulary costs one string each.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint32;
  int64_t int_value = 0;       // every integer type and bool (uint64 as bits)
  double float_value = 0.0;    // float32 / float64
  std::string string_value;

  GgufValueType elem_type = GgufValueType::kUint32;  // arrays only
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::vector<GgufValue> arrays;

  bool is_integer() const;
  bool is_float() const { return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64; }
  bool is_array() const { return type == GgufValueType::kArray; }
  uint64_t array_size() const;
  // Human-readable, arrays abbreviated past `max_elems`.
  std::string to_string(size_t max_elems = 8) const;

  static GgufValue make_uint32(uint32_t v);
  static GgufValue make_int32(int32_t v);
  static GgufValue make_uint64(uint64_t v);
  static GgufValue make_float32(float v);
  static GgufValue make_bool(bool v);
  static GgufValue make_string(std::string v);
  static GgufValue make_string_array(std::vector<std::string> v);
  static GgufValue make_float32_array(std::vector<double> v);
  static GgufValue make_int32_array(std::vector<int64_t> v);
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ne[0] first: ne[0] is contiguous (input / column)
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;
  uint64_t elems = 0;
  const uint8_t* data = nullptr;  // into the mapping; valid while the GgufFile lives

  uint64_t ne(size_t i) const { return i < dims.size() ? dims[i] : 1; }
  uint64_t rows() const { return elems / ne(0); }
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path,
                               MappedFile::Residency residency = MappedFile::Residency::kMapped);
  // Parses bytes already in memory (tests, the fuzzer, in-memory models).
  static Result<GgufFile> parse(MappedFile file);

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::string& path() const { return file_.path(); }
  uint64_t file_size() const { return file_.size(); }
  bool resident() const { return file_.resident(); }

  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;

  // Typed metadata access with errors that name the file and key.
  Result<std::string> get_string(const std::string& key) const;
  Result<int64_t> get_int(const std::string& key) const;
  Result<double> get_float(const std::string& key) const;
  std::optional<int64_t> find_int(const std::string& key) const;
  std::optional<double> find_float(const std::string& key) const;
  std::optional<std::string> find_string(const std::string& key) const;
  std::optional<bool> find_bool(const std::string& key) const;

 private:
  MappedFile file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace ork
