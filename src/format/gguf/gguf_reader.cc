#include <cstring>
#include <limits>

#include "format/byte_cursor.h"
#include "format/gguf/gguf.h"

namespace ork {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint32_t kMaxArrayDepth = 8;   // nested arrays deeper than this are hostile
constexpr uint64_t kMaxStringBytes = 1ull << 30;
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS

// Smallest encoded size of one value of a type, used to reject array
// counts that cannot fit in the bytes left before allocating anything.
uint64_t min_encoded_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kString: return 8;
    case GgufValueType::kArray: return 12;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
  }
  return 1;
}

Status read_value_type(ByteCursor& cur, GgufValueType* out, const char* what) {
  uint32_t raw = 0;
  ORK_RETURN_IF_ERROR(cur.read(&raw, what));
  if (raw >= kGgufValueTypeCount) {
    return error(StatusCode::kCorrupt, "unknown metadata value type {} at byte {}", raw, cur.pos() - 4);
  }
  *out = static_cast<GgufValueType>(raw);
  return Status::ok();
}

template <typename T>
Status read_int(ByteCursor& cur, int64_t* out) {
  T v{};
  ORK_RETURN_IF_ERROR(cur.read(&v, "integer value"));
  *out = static_cast<int64_t>(v);
  return Status::ok();
}

// Reads one scalar (not an array) of `type` into `value`.
Status read_scalar(ByteCursor& cur, GgufValueType type, GgufValue* value) {
  value->type = type;
  switch (type) {
    case GgufValueType::kUint8: return read_int<uint8_t>(cur, &value->int_value);
    case GgufValueType::kInt8: return read_int<int8_t>(cur, &value->int_value);
    case GgufValueType::kUint16: return read_int<uint16_t>(cur, &value->int_value);
    case GgufValueType::kInt16: return read_int<int16_t>(cur, &value->int_value);
    case GgufValueType::kUint32: return read_int<uint32_t>(cur, &value->int_value);
    case GgufValueType::kInt32: return read_int<int32_t>(cur, &value->int_value);
    case GgufValueType::kUint64: return read_int<uint64_t>(cur, &value->int_value);
    case GgufValueType::kInt64: return read_int<int64_t>(cur, &value->int_value);
    case GgufValueType::kBool: {
      uint8_t b = 0;
      ORK_RETURN_IF_ERROR(cur.read(&b, "bool value"));
      if (b > 1) return error(StatusCode::kCorrupt, "bool value {} at byte {} is not 0 or 1", b, cur.pos() - 1);
      value->int_value = b;
      return Status::ok();
    }
    case GgufValueType::kFloat32: {
      float f = 0;
      ORK_RETURN_IF_ERROR(cur.read(&f, "float32 value"));
      value->float_value = f;
      return Status::ok();
    }
    case GgufValueType::kFloat64: return cur.read(&value->float_value, "float64 value");
    case GgufValueType::kString: return cur.read_string(&value->string_value, "string value", kMaxStringBytes);
    case GgufValueType::kArray: break;
  }
  return error(StatusCode::kInternal, "read_scalar called for an array");
}

Status read_value(ByteCursor& cur, GgufValueType type, GgufValue* value, uint32_t depth) {
  if (type != GgufValueType::kArray) return read_scalar(cur, type, value);
  if (depth >= kMaxArrayDepth) {
    return error(StatusCode::kCorrupt, "arrays nested deeper than {} at byte {}", kMaxArrayDepth, cur.pos());
  }
  value->type = GgufValueType::kArray;
  ORK_RETURN_IF_ERROR(read_value_type(cur, &value->elem_type, "array element type"));
  uint64_t count = 0;
  ORK_RETURN_IF_ERROR(cur.read(&count, "array length"));
  if (count > cur.remaining() / min_encoded_bytes(value->elem_type)) {
    return error(StatusCode::kCorrupt, "array of {} {} at byte {} cannot fit in the {} bytes left", count,
                 gguf_value_type_name(value->elem_type), cur.pos() - 8, cur.remaining());
  }
  GgufValue element;
  switch (value->elem_type) {
    case GgufValueType::kString:
      value->strings.resize(count);
      for (uint64_t i = 0; i < count; ++i) {
        ORK_RETURN_IF_ERROR(cur.read_string(&value->strings[i], "array string", kMaxStringBytes));
      }
      return Status::ok();
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      value->floats.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        ORK_RETURN_IF_ERROR(read_scalar(cur, value->elem_type, &element));
        value->floats.push_back(element.float_value);
      }
      return Status::ok();
    case GgufValueType::kArray:
      value->arrays.resize(count);
      for (uint64_t i = 0; i < count; ++i) {
        ORK_RETURN_IF_ERROR(read_value(cur, GgufValueType::kArray, &value->arrays[i], depth + 1));
      }
      return Status::ok();
    default:
      value->ints.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        ORK_RETURN_IF_ERROR(read_scalar(cur, value->elem_type, &element));
        value->ints.push_back(element.int_value);
      }
      return Status::ok();
  }
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

Result<GgufFile> GgufFile::open(const std::string& path, MappedFile::Residency residency) {
  ORK_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path, residency));
  return parse(std::move(file));
}

Result<GgufFile> GgufFile::parse(MappedFile file) {
  GgufFile gguf;
  gguf.file_ = std::move(file);
  const std::string& name = gguf.file_.path();
  auto fail = [&](const Status& s) { return s.with_context(name); };
  ByteCursor cur(gguf.file_.data(), gguf.file_.size());

  uint32_t magic = 0;
  if (!cur.read(&magic, "magic").is_ok() || magic != kMagic) {
    return fail(error(StatusCode::kCorrupt, "not a GGUF file (bad magic; expected the bytes 'GGUF')"));
  }
  Status s = cur.read(&gguf.version_, "version");
  if (!s.is_ok()) return fail(s);
  if (gguf.version_ == 1) {
    return fail(error(StatusCode::kUnsupported, "GGUF version 1 is obsolete; convert it again with current tools"));
  }
  if (gguf.version_ != 2 && gguf.version_ != 3) {
    return fail(error(StatusCode::kUnsupported, "GGUF version {} is not supported (2 and 3 are)", gguf.version_));
  }
  uint64_t tensor_count = 0, kv_count = 0;
  if (!(s = cur.read(&tensor_count, "tensor count")).is_ok()) return fail(s);
  if (!(s = cur.read(&kv_count, "metadata count")).is_ok()) return fail(s);
  // Each metadata entry takes at least 12 bytes, each tensor info at least 24.
  if (kv_count > cur.remaining() / 12) {
    return fail(error(StatusCode::kCorrupt, "metadata count {} cannot fit in a {}-byte file", kv_count,
                      gguf.file_.size()));
  }
  if (tensor_count > cur.remaining() / 24) {
    return fail(error(StatusCode::kCorrupt, "tensor count {} cannot fit in a {}-byte file", tensor_count,
                      gguf.file_.size()));
  }

  gguf.metadata_.reserve(kv_count);
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key;
    if (!(s = cur.read_string(&key, "metadata key", kMaxStringBytes)).is_ok()) {
      return fail(s.with_context(fmt::format("metadata #{}", i)));
    }
    GgufValueType type{};
    GgufValue value;
    if (!(s = read_value_type(cur, &type, "metadata value type")).is_ok() ||
        !(s = read_value(cur, type, &value, 0)).is_ok()) {
      return fail(s.with_context(fmt::format("metadata '{}'", key)));
    }
    if (!gguf.metadata_index_.emplace(key, gguf.metadata_.size()).second) {
      return fail(error(StatusCode::kCorrupt, "metadata key '{}' appears twice", key));
    }
    gguf.metadata_.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* a = gguf.find("general.alignment")) {
    if (a->type != GgufValueType::kUint32) {
      return fail(error(StatusCode::kCorrupt, "general.alignment must be uint32, not {}", gguf_value_type_name(a->type)));
    }
    const auto align = static_cast<uint64_t>(a->int_value);
    if (align == 0 || (align & (align - 1)) != 0) {
      return fail(error(StatusCode::kCorrupt, "general.alignment {} is not a power of two", align));
    }
    gguf.alignment_ = static_cast<uint32_t>(align);
  }

  gguf.tensors_.resize(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo& t = gguf.tensors_[i];
    const std::string where = fmt::format("tensor #{}", i);
    if (!(s = cur.read_string(&t.name, "tensor name", kMaxStringBytes)).is_ok()) return fail(s.with_context(where));
    const std::string tname = fmt::format("tensor '{}'", t.name);
    uint32_t n_dims = 0;
    if (!(s = cur.read(&n_dims, "dimension count")).is_ok()) return fail(s.with_context(tname));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return fail(error(StatusCode::kCorrupt, "{}: {} dimensions (1 to {} allowed)", tname, n_dims, kMaxDims));
    }
    t.dims.resize(n_dims);
    t.elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      if (!(s = cur.read(&t.dims[d], "dimension")).is_ok()) return fail(s.with_context(tname));
      if (t.dims[d] == 0 || t.dims[d] > (1ull << 40) || mul_overflows(t.elems, t.dims[d], &t.elems) ||
          t.elems > (1ull << 42)) {
        return fail(error(StatusCode::kCorrupt, "{}: absurd dimension ne[{}] = {}", tname, d, t.dims[d]));
      }
    }
    uint32_t type_id = 0;
    if (!(s = cur.read(&type_id, "tensor type")).is_ok()) return fail(s.with_context(tname));
    const auto info = ggml_type_info(type_id);
    if (!info) return fail(error(StatusCode::kUnsupported, "{}: unknown ggml type id {}", tname, type_id));
    t.type = info->type;
    if (t.dims[0] % info->block_elems != 0) {
      return fail(error(StatusCode::kCorrupt, "{}: ne[0] = {} is not a multiple of the {} block size {}", tname,
                        t.dims[0], info->name, info->block_elems));
    }
    t.bytes = t.elems / info->block_elems * info->block_bytes;
    if (!(s = cur.read(&t.offset, "tensor data offset")).is_ok()) return fail(s.with_context(tname));
    if (t.offset % gguf.alignment_ != 0) {
      return fail(error(StatusCode::kCorrupt, "{}: data offset {} is not a multiple of the alignment {}", tname,
                        t.offset, gguf.alignment_));
    }
    if (!gguf.tensor_index_.emplace(t.name, i).second) {
      return fail(error(StatusCode::kCorrupt, "tensor name '{}' appears twice", t.name));
    }
  }

  const uint64_t header_end = cur.pos();
  gguf.data_offset_ = (header_end + gguf.alignment_ - 1) / gguf.alignment_ * gguf.alignment_;
  const uint64_t size = gguf.file_.size();
  if (tensor_count > 0 && gguf.data_offset_ > size) {
    return fail(error(StatusCode::kCorrupt, "data section would start at {} past the end of the file ({})",
                      gguf.data_offset_, size));
  }
  for (GgufTensorInfo& t : gguf.tensors_) {
    const uint64_t available = size - gguf.data_offset_;
    if (t.offset > available || t.bytes > available - t.offset) {
      return fail(error(StatusCode::kCorrupt, "tensor '{}': data [{}, {}) runs past the end of the data section ({} bytes)",
                        t.name, t.offset, t.offset + t.bytes, available));
    }
    t.data = gguf.file_.data() + gguf.data_offset_ + t.offset;
  }
  return gguf;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return error(StatusCode::kNotFound, "{}: metadata key '{}' is missing", path(), key);
  if (v->type != GgufValueType::kString) {
    return error(StatusCode::kCorrupt, "{}: metadata '{}' is {}, expected string", path(), key,
                 gguf_value_type_name(v->type));
  }
  return v->string_value;
}

Result<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return error(StatusCode::kNotFound, "{}: metadata key '{}' is missing", path(), key);
  if (!v->is_integer()) {
    return error(StatusCode::kCorrupt, "{}: metadata '{}' is {}, expected an integer", path(), key,
                 gguf_value_type_name(v->type));
  }
  return v->int_value;
}

Result<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return error(StatusCode::kNotFound, "{}: metadata key '{}' is missing", path(), key);
  if (v->is_float()) return v->float_value;
  if (v->is_integer()) return static_cast<double>(v->int_value);
  return error(StatusCode::kCorrupt, "{}: metadata '{}' is {}, expected a number", path(), key,
               gguf_value_type_name(v->type));
}

std::optional<int64_t> GgufFile::find_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || !v->is_integer()) return std::nullopt;
  return v->int_value;
}

std::optional<double> GgufFile::find_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_float()) return v->float_value;
  if (v->is_integer()) return static_cast<double>(v->int_value);
  return std::nullopt;
}

std::optional<std::string> GgufFile::find_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufValueType::kString) return std::nullopt;
  return v->string_value;
}

std::optional<bool> GgufFile::find_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || !v->is_integer()) return std::nullopt;
  return v->int_value != 0;
}

}  // namespace ork
