// orkpack writer -> reader round trips, and hand-made corrupt files.
#include "format/orkpack/orkpack.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "format/gguf/gguf_writer.h"

namespace ork {
namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/" + name; }

std::vector<uint8_t> sample_metadata() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::make_string("llama"));
  w.set("ork.rotation.seed", GgufValue::make_uint64(77));
  w.set("tokenizer.ggml.tokens", GgufValue::make_string_array({"a", "b"}));
  return *w.write_memory();
}

// Two tensors: a 3 x 40 i4 matrix (k_stored 64, rotated with block 64) and
// a 5-vector in f32.
std::string write_sample(const std::string& name) {
  const std::string path = temp_path(name);
  auto w = OrkpackWriter::create(path, sample_metadata());
  EXPECT_TRUE(w.is_ok()) << w.status().to_string();
  OrkpackTensorSpec m{"blk.0.attn_q.weight", Tier::kI4, OrkLayout::kRowMajor, {40, 3}, 64, 64, 0.01f};
  std::vector<uint8_t> data(tier_data_bytes(Tier::kI4, 3, 64));
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 37);
  const std::vector<float> scales = {0.5f, 0.25f, 2.0f};
  EXPECT_TRUE(w->add_tensor(m, data, scales).is_ok());
  OrkpackTensorSpec v{"output_norm.weight", Tier::kF32, OrkLayout::kRowMajor, {5}, 32, 0, 0.0f};
  std::vector<float> values(32, 0.0f);
  for (int i = 0; i < 5; ++i) values[static_cast<size_t>(i)] = 1.0f + static_cast<float>(i);
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  EXPECT_TRUE(w->add_tensor(v, bytes, {}).is_ok());
  EXPECT_TRUE(w->finish().is_ok());
  return path;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Status parse(std::vector<uint8_t> bytes) {
  return OrkpackFile::parse(MappedFile::from_bytes(std::move(bytes), "bad.orkpack")).status();
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

template <typename T>
T peek(const std::vector<uint8_t>& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// Byte offset of the first directory entry's tier field.
size_t first_entry_fields(const std::vector<uint8_t>& b) {
  const auto dir = peek<uint64_t>(b, 32);
  return dir + 8 + 8 + std::strlen("blk.0.attn_q.weight");
}

TEST(Orkpack, RoundTrip) {
  const std::string path = write_sample("rt.orkpack");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto pack = OrkpackFile::open(path);
  ASSERT_TRUE(pack.is_ok()) << pack.status().to_string();
  EXPECT_EQ(pack->version(), kOrkpackVersion);
  EXPECT_EQ(*pack->metadata().get_string("general.architecture"), "llama");
  EXPECT_EQ(pack->rotation_seed(), 77u);
  ASSERT_EQ(pack->tensors().size(), 2u);
  const OrkpackTensor* m = pack->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->spec.tier, Tier::kI4);
  EXPECT_EQ(m->spec.dims, (std::vector<uint64_t>{40, 3}));
  EXPECT_EQ(m->spec.k_stored, 64);
  EXPECT_EQ(m->spec.rotation_block, 64u);
  EXPECT_FLOAT_EQ(m->spec.error, 0.01f);
  EXPECT_EQ(m->data[5], static_cast<uint8_t>(5 * 37));
  EXPECT_EQ(m->scales[2], 2.0f);
  EXPECT_TRUE(m->scales_f16);  // 0.5, 0.25 and 2 are f16 values: 2 bytes a row
  EXPECT_EQ(m->scales_size, 6u);
  EXPECT_EQ(m->memory_bytes(), m->data_size + 12);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data) % kOrkpackAlign, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->scales) % kOrkpackAlign, 0u);
  const OrkpackTensor* v = pack->find_tensor("output_norm.weight");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->scales, nullptr);
  std::vector<float> row(32);
  dequantize_tier_row(v->view(), 0, row.data());
  EXPECT_EQ(row[4], 5.0f);
  EXPECT_TRUE(OrkpackFile::sniff_file(path));
}

// One i8 tensor of 3 rows with the given scales.
std::string write_scales(const std::string& name, const std::vector<float>& scales) {
  const std::string path = temp_path(name);
  auto w = OrkpackWriter::create(path, sample_metadata());
  EXPECT_TRUE(w.is_ok());
  OrkpackTensorSpec m{"blk.0.attn_k.weight", Tier::kI8, OrkLayout::kRowMajor, {32, 3}, 32, 0, 0.0f};
  EXPECT_TRUE(w->add_tensor(m, std::vector<uint8_t>(tier_data_bytes(Tier::kI8, 3, 32), 1), scales).is_ok());
  EXPECT_TRUE(w->finish().is_ok());
  return path;
}

TEST(Orkpack, ScalesThatAreNotAllF16ValuesStayF32) {
  // 0.1 is no f16 value: the tensor keeps every scale in f32, exactly.
  const std::vector<float> scales = {0.5f, 0.1f, 1e-6f};
  auto pack = OrkpackFile::open(write_scales("f32-scales.orkpack", scales));
  ASSERT_TRUE(pack.is_ok()) << pack.status().to_string();
  const OrkpackTensor& t = pack->tensors()[0];
  EXPECT_FALSE(t.scales_f16);
  EXPECT_EQ(t.scales_size, 12u);
  EXPECT_EQ(std::vector<float>(t.scales, t.scales + 3), scales);
  EXPECT_FALSE(f16_scales_exact(scales));
  EXPECT_EQ(orkpack_scale_bytes(scales), 12u);
  // f16 subnormals and zero are f16 values too.
  const std::vector<float> halves = {0.0f, 5.9604644775390625e-08f, 65504.0f};  // 2^-24: the least subnormal
  EXPECT_TRUE(f16_scales_exact(halves));
  auto small = OrkpackFile::open(write_scales("f16-edge-scales.orkpack", halves));
  ASSERT_TRUE(small.is_ok());
  EXPECT_TRUE(small->tensors()[0].scales_f16);
  EXPECT_EQ(std::vector<float>(small->tensors()[0].scales, small->tensors()[0].scales + 3), halves);
}

// A version 1 file (ork before f16 scales) is still read; f16-sized scales
// in one are refused.
TEST(Orkpack, ReadsVersion1) {
  std::vector<uint8_t> v1 = read_bytes(write_scales("v1.orkpack", {0.5f, 0.1f, 3.0f}));
  poke<uint32_t>(v1, 8, 1);
  auto pack = OrkpackFile::parse(MappedFile::from_bytes(v1, "v1.orkpack"));
  ASSERT_TRUE(pack.is_ok()) << pack.status().to_string();
  EXPECT_EQ(pack->version(), 1u);
  EXPECT_EQ(pack->tensors()[0].scales[1], 0.1f);
  std::vector<uint8_t> v1_f16 = read_bytes(write_scales("v1-f16.orkpack", {0.5f, 0.25f, 3.0f}));
  poke<uint32_t>(v1_f16, 8, 1);
  const Status s = OrkpackFile::parse(MappedFile::from_bytes(v1_f16, "v1-f16.orkpack")).status();
  EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.to_string();
  EXPECT_NE(s.message().find("6 scale bytes, 12 expected (f32)"), std::string::npos) << s.message();
}

TEST(Orkpack, KeptOnDiskLeavesWidenedScalesInMemory) {
  const std::string path = write_sample("keep.orkpack");
  auto pack = OrkpackFile::open(path);
  ASSERT_TRUE(pack.is_ok());
  ASSERT_TRUE(pack->keep_on_disk([](const OrkpackTensor& t) { return t.spec.tier == Tier::kF32; }).is_ok());
  const OrkpackTensor* m = pack->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(m, nullptr);
  ASSERT_NE(m->scales, nullptr);
  EXPECT_EQ(std::vector<float>(m->scales, m->scales + 3), (std::vector<float>{0.5f, 0.25f, 2.0f}));
  EXPECT_EQ(m->data[5], static_cast<uint8_t>(5 * 37));
  EXPECT_EQ(pack->find_tensor("output_norm.weight")->data, nullptr);
}

TEST(Orkpack, WriterRemovesItsTempFileWhenAbandoned) {
  const std::string path = temp_path("abandoned.orkpack");
  auto temporaries = [] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir())) {
      n += e.path().filename().string().rfind(".abandoned.orkpack.ork-", 0) == 0;
    }
    return n;
  };
  {
    auto w = OrkpackWriter::create(path, sample_metadata());
    ASSERT_TRUE(w.is_ok());
    EXPECT_EQ(temporaries(), 1);
    EXPECT_FALSE(std::filesystem::exists(path));  // nothing under the final name until finish()
  }
  EXPECT_EQ(temporaries(), 0);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Orkpack, WriterRejectsWrongSizes) {
  auto w = OrkpackWriter::create(temp_path("sizes.orkpack"), sample_metadata());
  ASSERT_TRUE(w.is_ok());
  OrkpackTensorSpec m{"t", Tier::kI8, OrkLayout::kRowMajor, {32, 2}, 32, 0, 0.0f};
  EXPECT_FALSE(w->add_tensor(m, std::vector<uint8_t>(10), std::vector<float>(2)).is_ok());
}

void expect_error(const Status& s, StatusCode code, const std::string& fragment) {
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bad.orkpack"), std::string::npos) << s.message();
}

class OrkpackCorrupt : public ::testing::Test {
 protected:
  // A file per test: ctest runs tests of this suite in parallel processes.
  void SetUp() override {
    bytes_ = read_bytes(write_sample(std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
                                     ".orkpack"));
  }
  std::vector<uint8_t> bytes_;
};

TEST_F(OrkpackCorrupt, ValidParses) { EXPECT_TRUE(parse(bytes_).is_ok()); }

TEST_F(OrkpackCorrupt, BadMagic) {
  bytes_[0] = 'X';
  expect_error(parse(bytes_), StatusCode::kCorrupt, "not an orkpack");
}

TEST_F(OrkpackCorrupt, FutureVersion) {
  poke<uint32_t>(bytes_, 8, kOrkpackVersion + 1);
  expect_error(parse(bytes_), StatusCode::kUnsupported, fmt::format("version {}", kOrkpackVersion + 1));
  poke<uint32_t>(bytes_, 8, 0);
  expect_error(parse(bytes_), StatusCode::kUnsupported, "version 0");
}

// The sample's i4 tensor keeps f16 scales: a NaN or an infinity among them
// is refused at open, naming the tensor and the row.
TEST_F(OrkpackCorrupt, NonFiniteF16Scale) {
  const size_t scales_offset_field = first_entry_fields(bytes_) + 12 + 16 + 8 + 8 + 8 + 8;
  const size_t at = peek<uint64_t>(bytes_, 48) + peek<uint64_t>(bytes_, scales_offset_field);
  ASSERT_EQ(peek<uint64_t>(bytes_, scales_offset_field + 8), 6u);  // scales_size: f16
  poke<uint16_t>(bytes_, at + 2, 0x7C00);                          // row 1: +inf
  expect_error(parse(bytes_), StatusCode::kCorrupt, "tensor 'blk.0.attn_q.weight': the scale of row 1 is inf");
  poke<uint16_t>(bytes_, at + 2, 0x7E00);
  expect_error(parse(bytes_), StatusCode::kCorrupt, "the scale of row 1 is nan");
}

TEST_F(OrkpackCorrupt, ScaleSizeNeitherF16NorF32) {
  const size_t scales_size_field = first_entry_fields(bytes_) + 12 + 16 + 8 + 8 + 8 + 8 + 8;
  poke<uint64_t>(bytes_, scales_size_field, 9);
  expect_error(parse(bytes_), StatusCode::kCorrupt, "9 scale bytes, 12 expected (f32) or 6 (f16)");
}

TEST_F(OrkpackCorrupt, TruncatedAnywhere) {
  for (size_t len : {size_t{0}, size_t{10}, size_t{63}, size_t{64}, size_t{200}, bytes_.size() / 2, bytes_.size() - 1}) {
    std::vector<uint8_t> cut(bytes_.begin(), bytes_.begin() + static_cast<long>(len));
    EXPECT_FALSE(parse(cut).is_ok()) << len;
  }
}

TEST_F(OrkpackCorrupt, SectionPastEnd) {
  poke<uint64_t>(bytes_, 56, 1ull << 40);
  expect_error(parse(bytes_), StatusCode::kCorrupt, "past the end");
}

TEST_F(OrkpackCorrupt, MisalignedDataSection) {
  poke<uint64_t>(bytes_, 48, peek<uint64_t>(bytes_, 48) + 8);
  poke<uint64_t>(bytes_, 56, peek<uint64_t>(bytes_, 56) - 8);
  expect_error(parse(bytes_), StatusCode::kCorrupt, "page aligned");
}

TEST_F(OrkpackCorrupt, OverlappingSections) {
  poke<uint64_t>(bytes_, 32, 64);  // directory on top of the metadata
  expect_error(parse(bytes_), StatusCode::kCorrupt, "overlap");
}

TEST_F(OrkpackCorrupt, CorruptMetadata) {
  bytes_[64] = 'X';  // the embedded GGUF's magic
  expect_error(parse(bytes_), StatusCode::kCorrupt, "not a GGUF");
}

TEST_F(OrkpackCorrupt, UnknownTier) {
  poke<uint32_t>(bytes_, first_entry_fields(bytes_), 99);
  expect_error(parse(bytes_), StatusCode::kUnsupported, "unknown tier id 99");
}

TEST_F(OrkpackCorrupt, UnknownLayout) {
  poke<uint32_t>(bytes_, first_entry_fields(bytes_) + 4, 5);
  expect_error(parse(bytes_), StatusCode::kUnsupported, "unknown layout id 5");
}

TEST_F(OrkpackCorrupt, AbsurdDimension) {
  poke<uint64_t>(bytes_, first_entry_fields(bytes_) + 12, 1ull << 50);
  expect_error(parse(bytes_), StatusCode::kCorrupt, "absurd dimension");
}

TEST_F(OrkpackCorrupt, WrongKStored) {
  poke<uint64_t>(bytes_, first_entry_fields(bytes_) + 12 + 16, 96);
  expect_error(parse(bytes_), StatusCode::kCorrupt, "k_stored");
}

TEST_F(OrkpackCorrupt, BadRotationBlock) {
  poke<uint32_t>(bytes_, first_entry_fields(bytes_) + 12 + 16 + 8 + 4, 48);
  expect_error(parse(bytes_), StatusCode::kCorrupt, "rotation");
}

TEST_F(OrkpackCorrupt, PlanesPastTheDataSection) {
  poke<uint64_t>(bytes_, first_entry_fields(bytes_) + 12 + 16 + 8 + 8, 1ull << 30);
  expect_error(parse(bytes_), StatusCode::kCorrupt, "run past the data section");
}

TEST_F(OrkpackCorrupt, WrongDataSize) {
  poke<uint64_t>(bytes_, first_entry_fields(bytes_) + 12 + 16 + 8 + 8 + 8, 7);
  expect_error(parse(bytes_), StatusCode::kCorrupt, "data bytes");
}

TEST_F(OrkpackCorrupt, AbsurdTensorCount) {
  poke<uint64_t>(bytes_, peek<uint64_t>(bytes_, 32), 1ull << 60);
  expect_error(parse(bytes_), StatusCode::kCorrupt, "tensor count");
}

}  // namespace
}  // namespace ork
