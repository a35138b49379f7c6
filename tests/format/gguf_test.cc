#include <gtest/gtest.h>

#include <cstring>

#include "format/gguf/gguf.h"
#include "format/gguf/gguf_writer.h"
#include "testdata.h"

namespace ork {
namespace {

GgufWriter sample_writer() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::make_string("llama"));
  w.set("llama.block_count", GgufValue::make_uint32(2));
  w.set("llama.rope.freq_base", GgufValue::make_float32(10000.0f));
  w.set("test.bool", GgufValue::make_bool(true));
  w.set("test.u64", GgufValue::make_uint64(1ull << 40));
  w.set("test.i32", GgufValue::make_int32(-7));
  w.set("tokenizer.ggml.tokens", GgufValue::make_string_array({"<unk>", "<s>", "</s>", "a\nb"}));
  w.set("tokenizer.ggml.scores", GgufValue::make_float32_array({0.0, -1.5, 2.25, 3.0}));
  GgufValue nested;
  nested.type = GgufValueType::kArray;
  nested.elem_type = GgufValueType::kArray;
  nested.arrays = {GgufValue::make_int32_array({1, 2}), GgufValue::make_int32_array({}),
                   GgufValue::make_string_array({"x"})};
  w.set("test.nested", nested);
  std::vector<uint8_t> f32(4 * 3 * 2);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<uint8_t>(i);
  EXPECT_TRUE(w.add_tensor("a", GgmlType::kF32, {3, 2}, f32).is_ok());
  std::vector<uint8_t> q(34 * 2, 0x11);
  EXPECT_TRUE(w.add_tensor("b", GgmlType::kQ8_0, {64}, q).is_ok());
  return w;
}

TEST(Gguf, WriterReaderRoundTrip) {
  auto bytes = sample_writer().write_memory();
  ASSERT_TRUE(bytes.is_ok());
  auto gguf = GgufFile::parse(MappedFile::from_bytes(*bytes, "mem.gguf"));
  ASSERT_TRUE(gguf.is_ok()) << gguf.status().to_string();
  EXPECT_EQ(gguf->version(), 3u);
  EXPECT_EQ(*gguf->get_string("general.architecture"), "llama");
  EXPECT_EQ(*gguf->get_int("llama.block_count"), 2);
  EXPECT_EQ(*gguf->get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(gguf->find_bool("test.bool"), true);
  EXPECT_EQ(static_cast<uint64_t>(*gguf->get_int("test.u64")), 1ull << 40);
  EXPECT_EQ(*gguf->get_int("test.i32"), -7);
  const GgufValue* tokens = gguf->find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->strings, (std::vector<std::string>{"<unk>", "<s>", "</s>", "a\nb"}));
  EXPECT_EQ(gguf->find("tokenizer.ggml.scores")->floats, (std::vector<double>{0.0, -1.5, 2.25, 3.0}));
  const GgufValue* nested = gguf->find("test.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->arrays.size(), 3u);
  EXPECT_EQ(nested->arrays[0].ints, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(nested->arrays[1].array_size(), 0u);
  EXPECT_EQ(nested->arrays[2].strings, std::vector<std::string>{"x"});

  ASSERT_EQ(gguf->tensors().size(), 2u);
  const GgufTensorInfo* a = gguf->find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dims, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(a->bytes, 24u);
  EXPECT_EQ(a->data[5], 5);
  const GgufTensorInfo* b = gguf->find_tensor("b");
  EXPECT_EQ(b->type, GgmlType::kQ8_0);
  EXPECT_EQ(b->bytes, 68u);
  EXPECT_EQ(b->offset % 32, 0u);
  EXPECT_EQ(b->data[67], 0x11);
  EXPECT_EQ((gguf->data_offset() + b->offset) % 32, 0u);
}

TEST(Gguf, CustomAlignmentIsHonoured) {
  GgufWriter w = sample_writer();
  w.set("general.alignment", GgufValue::make_uint32(128));
  auto bytes = w.write_memory();
  ASSERT_TRUE(bytes.is_ok());
  auto gguf = GgufFile::parse(MappedFile::from_bytes(*bytes, "mem.gguf"));
  ASSERT_TRUE(gguf.is_ok()) << gguf.status().to_string();
  EXPECT_EQ(gguf->alignment(), 128u);
  EXPECT_EQ(gguf->data_offset() % 128, 0u);
  EXPECT_EQ(gguf->find_tensor("b")->offset % 128, 0u);
}

TEST(Gguf, WriteFileIsAtomicAndReadable) {
  const std::string path = ::testing::TempDir() + "/ork_roundtrip.gguf";
  ASSERT_TRUE(sample_writer().write_file(path).is_ok());
  auto gguf = GgufFile::open(path);
  ASSERT_TRUE(gguf.is_ok()) << gguf.status().to_string();
  EXPECT_EQ(gguf->tensors().size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Gguf, MissingFileNamesThePath) {
  auto gguf = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(gguf.is_ok());
  EXPECT_NE(gguf.status().message().find("/nonexistent/model.gguf"), std::string::npos);
}

TEST(Gguf, ReadsRealModels) {
  ORK_REQUIRE_TESTDATA("models/stories260K-f32.gguf");
  auto gguf = GgufFile::open(testing::testdata("models/stories260K-f32.gguf"));
  ASSERT_TRUE(gguf.is_ok()) << gguf.status().to_string();
  EXPECT_EQ(*gguf->get_string("general.architecture"), "llama");
  EXPECT_EQ(gguf->find("tokenizer.ggml.tokens")->strings.size(), 512u);
  const GgufTensorInfo* emb = gguf->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dims, (std::vector<uint64_t>{64, 512}));
}

}  // namespace
}  // namespace ork

namespace ork {
namespace {

// GGUF v2 has v3's layout (64-bit counts); only the version differs.
TEST(Gguf, ReadsVersion2) {
  auto bytes = *sample_writer().write_memory();
  const uint32_t v2 = 2;
  std::memcpy(bytes.data() + 4, &v2, 4);
  auto gguf = GgufFile::parse(MappedFile::from_bytes(bytes, "v2.gguf"));
  ASSERT_TRUE(gguf.is_ok()) << gguf.status().to_string();
  EXPECT_EQ(gguf->version(), 2u);
  EXPECT_EQ(gguf->tensors().size(), 2u);
}

TEST(Gguf, Version1IsRejectedWithAHint) {
  auto bytes = *sample_writer().write_memory();
  const uint32_t v1 = 1;
  std::memcpy(bytes.data() + 4, &v1, 4);
  auto gguf = GgufFile::parse(MappedFile::from_bytes(bytes, "v1.gguf"));
  ASSERT_FALSE(gguf.is_ok());
  EXPECT_NE(gguf.status().message().find("version 1"), std::string::npos);
}

}  // namespace
}  // namespace ork

#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "format/orkpack/orkpack.h"

namespace ork {
namespace {

// Writing to a device or pipe writes through it: renaming a temporary file
// over it (as regular outputs are written) would replace the node itself
// (`ork synth -o /dev/null` once turned /dev/null into a regular file).
TEST(Gguf, WriteFileToAPipeWritesThroughIt) {
  const std::string dir = ::testing::TempDir() + "ork_fifo_test";
  std::remove((dir + "/out").c_str());
  ::mkdir(dir.c_str(), 0700);
  const std::string fifo = dir + "/out";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  size_t read_bytes = 0;
  std::thread reader([&] {
    std::ifstream in(fifo, std::ios::binary);
    char buf[4096];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) read_bytes += static_cast<size_t>(in.gcount());
  });
  GgufWriter w;
  w.set("general.architecture", GgufValue::make_string("llama"));
  const Status s = w.write_file(fifo, {});
  reader.join();
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_GT(read_bytes, 0u);
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the pipe was replaced";
  std::remove(fifo.c_str());
}

// An orkpack needs a regular file (its header is written last, by seeking
// back): a device is refused by name, before anything is created.
TEST(Orkpack, WriterRefusesANonRegularOutput) {
  auto w = OrkpackWriter::create("/dev/null", {});
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("/dev/null: not a regular file"), std::string::npos) << w.status().message();
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

}  // namespace
}  // namespace ork
