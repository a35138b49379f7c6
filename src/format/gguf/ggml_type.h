// The ggml tensor types that can appear in a GGUF file, with their block
// geometry. Ids are the on-disk values and never change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ork {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;
  uint32_t block_elems;   // weights per block
  uint32_t block_bytes;   // bytes per block
  bool dequantizable;     // ork has a reference dequantizer for it
};

// Facts about a known type id, or nullopt for an id ork has never heard of.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
std::string_view ggml_type_name(GgmlType type);
// Parses "Q4_K", "q4_k", "F16", ... (names as llama.cpp prints them).
std::optional<GgmlType> ggml_type_from_name(std::string_view name);

// Bytes of `elems` consecutive weights of `type`; elems must be a multiple
// of the block size (checked by callers that read files).
inline uint64_t ggml_row_bytes(const GgmlTypeInfo& info, uint64_t elems) {
  return elems / info.block_elems * info.block_bytes;
}

}  // namespace ork
