// Hand-made corrupt and hostile GGUF files: each must fail with a clear
// error naming what is wrong, never crash. (The fuzzer covers the rest.)
#include <gtest/gtest.h>

#include <cstring>

#include "format/gguf/gguf.h"
#include "format/gguf/gguf_writer.h"

namespace ork {
namespace {

std::vector<uint8_t> valid_file() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::make_string("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::make_string_array({"a", "b"}));
  std::vector<uint8_t> data(4 * 8, 0);
  EXPECT_TRUE(w.add_tensor("t", GgmlType::kF32, {8}, data).is_ok());
  return *w.write_memory();
}

// Byte offsets in valid_file(): magic 0, version 4, n_tensors 8, n_kv 16,
// first key length 24, first key text 32.
constexpr size_t kTensorCountAt = 8;
constexpr size_t kKvCountAt = 16;

Status parse(std::vector<uint8_t> bytes) {
  return GgufFile::parse(MappedFile::from_bytes(std::move(bytes), "bad.gguf")).status();
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

// Offset of the first tensor info's fields, found from the back of the header.
size_t tensor_info_at(const std::vector<uint8_t>& b) {
  const char name[] = {1, 0, 0, 0, 0, 0, 0, 0, 't'};
  for (size_t i = 0; i + sizeof name <= b.size(); ++i) {
    if (std::memcmp(b.data() + i, name, sizeof name) == 0) return i + sizeof name;
  }
  return 0;
}

void expect_error(const Status& s, StatusCode code, const std::string& fragment) {
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "message: " << s.message();
  EXPECT_NE(s.message().find("bad.gguf"), std::string::npos) << "message: " << s.message();
}

TEST(GgufCorrupt, ValidFileParses) { EXPECT_TRUE(parse(valid_file()).is_ok()); }

TEST(GgufCorrupt, BadMagic) {
  auto b = valid_file();
  b[0] = 'X';
  expect_error(parse(b), StatusCode::kCorrupt, "bad magic");
}

TEST(GgufCorrupt, EmptyFile) { expect_error(parse({}), StatusCode::kCorrupt, "not a GGUF"); }

TEST(GgufCorrupt, UnsupportedVersion) {
  auto b = valid_file();
  poke<uint32_t>(b, 4, 7);
  expect_error(parse(b), StatusCode::kUnsupported, "version 7");
}

TEST(GgufCorrupt, TruncatedHeaderAtEveryLength) {
  const auto b = valid_file();
  const size_t info = tensor_info_at(b);
  ASSERT_GT(info, 0u);
  for (size_t len = 0; len < info + 20; ++len) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<long>(len));
    EXPECT_FALSE(parse(cut).is_ok()) << "length " << len;
  }
}

TEST(GgufCorrupt, TruncatedData) {
  auto b = valid_file();
  b.resize(b.size() - 4);
  expect_error(parse(b), StatusCode::kCorrupt, "runs past the end");
}

TEST(GgufCorrupt, AbsurdTensorCount) {
  auto b = valid_file();
  poke<uint64_t>(b, kTensorCountAt, 1ull << 62);
  expect_error(parse(b), StatusCode::kCorrupt, "tensor count");
}

TEST(GgufCorrupt, AbsurdMetadataCount) {
  auto b = valid_file();
  poke<uint64_t>(b, kKvCountAt, ~0ull);
  expect_error(parse(b), StatusCode::kCorrupt, "metadata count");
}

TEST(GgufCorrupt, AbsurdStringLength) {
  auto b = valid_file();
  poke<uint64_t>(b, 24, 1ull << 50);
  expect_error(parse(b), StatusCode::kCorrupt, "metadata key");
}

TEST(GgufCorrupt, AbsurdArrayLength) {
  auto b = valid_file();
  // The tokens array: key, type 9, elem type 8, then the u64 count.
  const std::string key = "tokenizer.ggml.tokens";
  size_t at = 0;
  for (size_t i = 0; i + key.size() < b.size(); ++i) {
    if (std::memcmp(b.data() + i, key.data(), key.size()) == 0) at = i + key.size() + 8;
  }
  ASSERT_GT(at, 0u);
  poke<uint64_t>(b, at, 1ull << 61);
  expect_error(parse(b), StatusCode::kCorrupt, "cannot fit");
}

TEST(GgufCorrupt, UnknownValueType) {
  auto b = valid_file();
  const size_t at = 32 + std::strlen("general.architecture");
  poke<uint32_t>(b, at, 99);
  expect_error(parse(b), StatusCode::kCorrupt, "unknown metadata value type 99");
}

TEST(GgufCorrupt, UnknownTensorType) {
  auto b = valid_file();
  const size_t info = tensor_info_at(b);
  poke<uint32_t>(b, info + 4 + 8, 77);  // after n_dims and one dim
  expect_error(parse(b), StatusCode::kUnsupported, "unknown ggml type id 77");
}

TEST(GgufCorrupt, TooManyDims) {
  auto b = valid_file();
  poke<uint32_t>(b, tensor_info_at(b), 9);
  expect_error(parse(b), StatusCode::kCorrupt, "9 dimensions");
}

TEST(GgufCorrupt, AbsurdDimension) {
  auto b = valid_file();
  poke<uint64_t>(b, tensor_info_at(b) + 4, 1ull << 60);
  expect_error(parse(b), StatusCode::kCorrupt, "absurd dimension");
}

TEST(GgufCorrupt, MisalignedTensorData) {
  auto b = valid_file();
  poke<uint64_t>(b, tensor_info_at(b) + 4 + 8 + 4, 4);
  expect_error(parse(b), StatusCode::kCorrupt, "not a multiple of the alignment");
}

TEST(GgufCorrupt, TensorDataOutOfRange) {
  auto b = valid_file();
  poke<uint64_t>(b, tensor_info_at(b) + 4 + 8 + 4, 1ull << 40);
  expect_error(parse(b), StatusCode::kCorrupt, "runs past the end");
}

TEST(GgufCorrupt, BlockSizeMismatch) {
  GgufWriter w;
  std::vector<uint8_t> q(34, 0);
  ASSERT_TRUE(w.add_tensor("t", GgmlType::kQ8_0, {32}, q).is_ok());
  auto b = *w.write_memory();
  poke<uint64_t>(b, tensor_info_at(b) + 4, 33);
  expect_error(parse(b), StatusCode::kCorrupt, "block size 32");
}

TEST(GgufCorrupt, BadAlignmentValue) {
  GgufWriter w;
  w.set("general.alignment", GgufValue::make_uint32(24));
  auto b = *w.write_memory();
  expect_error(parse(b), StatusCode::kCorrupt, "not a power of two");
}

TEST(GgufCorrupt, DuplicateKey) {
  std::vector<uint8_t> h;
  auto put = [&](auto v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    h.insert(h.end(), p, p + sizeof v);
  };
  put(uint32_t{0x46554747});
  put(uint32_t{3});
  put(uint64_t{0});
  put(uint64_t{2});
  for (int i = 0; i < 2; ++i) {
    put(uint64_t{1});
    h.push_back('k');
    put(uint32_t{4});
    put(static_cast<uint32_t>(i));
  }
  expect_error(parse(h), StatusCode::kCorrupt, "appears twice");
}

TEST(GgufCorrupt, DeeplyNestedArrays) {
  std::vector<uint8_t> h;
  auto put = [&](auto v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    h.insert(h.end(), p, p + sizeof v);
  };
  put(uint32_t{0x46554747});
  put(uint32_t{3});
  put(uint64_t{0});
  put(uint64_t{1});
  put(uint64_t{1});
  h.push_back('k');
  put(uint32_t{9});
  for (int i = 0; i < 100; ++i) {
    put(uint32_t{9});
    put(uint64_t{1});
  }
  put(uint32_t{4});
  put(uint64_t{0});
  expect_error(parse(h), StatusCode::kCorrupt, "nested deeper");
}

}  // namespace
}  // namespace ork
