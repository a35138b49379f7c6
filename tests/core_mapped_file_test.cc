#include "core/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace ork {
namespace {

// A file of its own per test (the pid keeps parallel runs apart).
std::string temp_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

TEST(MappedFile, ResidentCopyHoldsTheSameBytesAsTheMapping) {
  // Not a whole number of pages, huge or small.
  std::vector<uint8_t> bytes((size_t{3} << 20) + 17);
  std::mt19937 rng(5);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const std::string path = temp_file("resident.bin", bytes);
  auto mapped = MappedFile::open(path);
  auto resident = MappedFile::open(path, MappedFile::Residency::kResident);
  ASSERT_TRUE(mapped.is_ok() && resident.is_ok());
  EXPECT_FALSE(mapped->resident());
  EXPECT_TRUE(resident->resident());
  ASSERT_EQ(resident->size(), bytes.size());
  EXPECT_EQ(0, std::memcmp(resident->data(), bytes.data(), bytes.size()));
  EXPECT_EQ(0, std::memcmp(mapped->data(), bytes.data(), bytes.size()));
  // 2 MiB aligned, so the kernel can back it with huge pages.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(resident->data()) % (size_t{2} << 20), 0u);
  // Moving keeps the bytes and empties the source.
  MappedFile moved = std::move(resident).value();
  EXPECT_EQ(moved.size(), bytes.size());
  EXPECT_EQ(moved.data()[bytes.size() - 1], bytes.back());
  std::remove(path.c_str());
}

TEST(MappedFile, ResidentCopyOnlyWhenItFitsInAvailableMemory) {
  EXPECT_TRUE(MappedFile::resident_fits(size_t{1} << 20));
  EXPECT_FALSE(MappedFile::resident_fits(size_t{1} << 60));
}

TEST(MappedFile, EmptyFileIsEmptyEitherWay) {
  const std::string path = temp_file("empty.bin", {});
  for (auto r : {MappedFile::Residency::kMapped, MappedFile::Residency::kResident}) {
    auto f = MappedFile::open(path, r);
    ASSERT_TRUE(f.is_ok());
    EXPECT_EQ(f->size(), 0u);
  }
  std::remove(path.c_str());
}

TEST(MappedFile, ErrorsNameTheFile) {
  for (auto r : {MappedFile::Residency::kMapped, MappedFile::Residency::kResident}) {
    auto missing = MappedFile::open("/nonexistent/ork-model.gguf", r);
    ASSERT_FALSE(missing.is_ok());
    EXPECT_NE(missing.status().to_string().find("/nonexistent/ork-model.gguf"), std::string::npos);
    auto dir = MappedFile::open(::testing::TempDir(), r);
    ASSERT_FALSE(dir.is_ok());
    EXPECT_NE(dir.status().to_string().find("not a regular file"), std::string::npos);
  }
}

}  // namespace
}  // namespace ork
