#include <fmt/format.h>

#include "format/gguf/gguf.h"

namespace ork {

const char* gguf_value_type_name(GgufValueType type) {
  static constexpr const char* kNames[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32", "float32",
                                           "bool",  "string", "array",  "uint64", "int64",  "float64"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kGgufValueTypeCount);
  const auto i = static_cast<uint32_t>(type);
  return i < kGgufValueTypeCount ? kNames[i] : "?";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kBool: return true;
    default: return false;
  }
}

uint64_t GgufValue::array_size() const {
  if (!is_array()) return 0;
  return ints.size() + floats.size() + strings.size() + arrays.size();
}

namespace {

std::string quoted(const std::string& s, size_t max_chars = 60) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
    const char c = s[i];
    if (c == '\n') out += "\\n";
    else if (c == '"') out += "\\\"";
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else out += c;
  }
  if (s.size() > max_chars) out += "...";
  return out + "\"";
}

}  // namespace

std::string GgufValue::to_string(size_t max_elems) const {
  switch (type) {
    case GgufValueType::kBool: return int_value ? "true" : "false";
    case GgufValueType::kUint64: return fmt::format("{}", static_cast<uint64_t>(int_value));
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: return fmt::format("{}", float_value);
    case GgufValueType::kString: return quoted(string_value);
    case GgufValueType::kArray: {
      std::string out = fmt::format("[{} x {}] [", array_size(), gguf_value_type_name(elem_type));
      const size_t n = std::min<uint64_t>(array_size(), max_elems);
      for (size_t i = 0; i < n; ++i) {
        if (i) out += ", ";
        if (!strings.empty()) out += quoted(strings[i], 20);
        else if (!floats.empty()) out += fmt::format("{}", floats[i]);
        else if (!arrays.empty()) out += arrays[i].to_string(2);
        else out += fmt::format("{}", ints[i]);
      }
      if (array_size() > n) out += ", ...";
      return out + "]";
    }
    default: return fmt::format("{}", int_value);
  }
}

GgufValue GgufValue::make_uint32(uint32_t v) {
  GgufValue value;
  value.type = GgufValueType::kUint32;
  value.int_value = v;
  return value;
}

GgufValue GgufValue::make_int32(int32_t v) {
  GgufValue value;
  value.type = GgufValueType::kInt32;
  value.int_value = v;
  return value;
}

GgufValue GgufValue::make_uint64(uint64_t v) {
  GgufValue value;
  value.type = GgufValueType::kUint64;
  value.int_value = static_cast<int64_t>(v);
  return value;
}

GgufValue GgufValue::make_float32(float v) {
  GgufValue value;
  value.type = GgufValueType::kFloat32;
  value.float_value = v;
  return value;
}

GgufValue GgufValue::make_bool(bool v) {
  GgufValue value;
  value.type = GgufValueType::kBool;
  value.int_value = v ? 1 : 0;
  return value;
}

GgufValue GgufValue::make_string(std::string v) {
  GgufValue value;
  value.type = GgufValueType::kString;
  value.string_value = std::move(v);
  return value;
}

GgufValue GgufValue::make_string_array(std::vector<std::string> v) {
  GgufValue value;
  value.type = GgufValueType::kArray;
  value.elem_type = GgufValueType::kString;
  value.strings = std::move(v);
  return value;
}

GgufValue GgufValue::make_float32_array(std::vector<double> v) {
  GgufValue value;
  value.type = GgufValueType::kArray;
  value.elem_type = GgufValueType::kFloat32;
  value.floats = std::move(v);
  return value;
}

GgufValue GgufValue::make_int32_array(std::vector<int64_t> v) {
  GgufValue value;
  value.type = GgufValueType::kArray;
  value.elem_type = GgufValueType::kInt32;
  value.ints = std::move(v);
  return value;
}

}  // namespace ork
