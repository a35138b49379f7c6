// The KV cache's element types and how an int8 (q8_0) cache lays out one
// KV head: shared by the model, which allocates, saves and loads it, the
// engines, which store rows into it, and the kernels, which read it.
//
// q8_0 is llama.cpp's cache type of that name in substance: each block of
// 32 values of a row (a position of one KV head) keeps int8 codes in
// [-127, 127] and one float scale, value = scale * code. ork keeps the
// scale in f32 (36 bytes a block against llama.cpp's 34).
//
// Keys go in tiles of kKvTile positions, transposed so that one int32 lane
// holds four consecutive codes of one position: a tile's codes are
// [head_dim / 4][kKvTile][4] bytes, so a vector of int32 lanes spans
// consecutive positions and a score comes out in each lane, with no sum
// across lanes. Their scales are [tile][head_dim / 32][kKvTile] floats.
// Values go position by position: codes [position][head_dim], scales
// [position][head_dim / 32] - the V pass walks a position's row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ork {

enum class KvType {
  kF16,   // f16, as llama.cpp's default
  kQ8_0,  // int8 codes and a scale per 32 values
};

// llama.cpp's spelling ("f16", "q8_0"), and back (nullopt: not a type ork keeps).
inline const char* kv_type_name(KvType t) { return t == KvType::kQ8_0 ? "q8_0" : "f16"; }
inline std::optional<KvType> kv_type_from_name(std::string_view s) {
  if (s == "f16") return KvType::kF16;
  if (s == "q8_0") return KvType::kQ8_0;
  return std::nullopt;
}

// A cache's keys' and values' types.
struct KvTypes {
  KvType k = KvType::kF16, v = KvType::kF16;
};

constexpr int kKvTile = 16;   // key positions per transposed tile
constexpr int kKvBlock = 32;  // values per scale

// One KV head's q8_0 cache of n_ctx positions (rounded up to whole tiles).
struct KvQ8Layout {
  int head_dim = 0;
  int64_t positions = 0;  // n_ctx rounded up to kKvTile

  KvQ8Layout(int hd, int64_t n_ctx) : head_dim(hd), positions((n_ctx + kKvTile - 1) / kKvTile * kKvTile) {}
  int blocks() const { return head_dim / kKvBlock; }
  // Codes and scales one head holds (keys and values alike).
  size_t codes() const { return static_cast<size_t>(positions) * static_cast<size_t>(head_dim); }
  size_t scales() const { return static_cast<size_t>(positions) * static_cast<size_t>(blocks()); }

  // Key code i of position p, and the scale of its block b.
  static size_t key_code(int64_t p, int i, int hd) {
    return static_cast<size_t>(p / kKvTile) * kKvTile * hd + static_cast<size_t>(i / 4) * (kKvTile * 4) +
           static_cast<size_t>(p % kKvTile) * 4 + static_cast<size_t>(i % 4);
  }
  static size_t key_scale(int64_t p, int b, int hd) {
    return static_cast<size_t>(p / kKvTile) * kKvTile * (hd / kKvBlock) + static_cast<size_t>(b) * kKvTile +
           static_cast<size_t>(p % kKvTile);
  }
  static size_t value_code(int64_t p, int i, int hd) { return static_cast<size_t>(p) * hd + static_cast<size_t>(i); }
  static size_t value_scale(int64_t p, int b, int hd) {
    return static_cast<size_t>(p) * (hd / kKvBlock) + static_cast<size_t>(b);
  }
};

}  // namespace ork
