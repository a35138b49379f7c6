// Where the shared test data lives, and a skip that names what is missing.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ork::testing {

inline std::string testdata_dir() {
  if (const char* env = std::getenv("ORK_TESTDATA"); env != nullptr && *env != 0) return env;
  return ORK_TESTDATA_DEFAULT;
}

inline std::string testdata(const std::string& relative) { return testdata_dir() + "/" + relative; }

// Whitespace-separated values of one type (a fixture's logits, its ids).
template <class T>
inline std::vector<T> read_text_values(const std::string& path) {
  std::vector<T> out;
  std::ifstream in(path);
  T v;
  while (in >> v) out.push_back(v);
  return out;
}

inline std::vector<float> read_floats_text(const std::string& path) { return read_text_values<float>(path); }

// Token ids (a fixture's prompt_ids, greedy ids).
inline std::vector<int32_t> read_ids(const std::string& path) { return read_text_values<int32_t>(path); }

inline std::vector<float> read_f32_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

}  // namespace ork::testing

// Skips the current test, naming the missing file, when test data is absent.
#define ORK_REQUIRE_TESTDATA(relative)                                                          \
  do {                                                                                          \
    if (!std::filesystem::exists(::ork::testing::testdata(relative))) {                         \
      GTEST_SKIP() << "test data missing: " << ::ork::testing::testdata(relative)               \
                   << " (set ORK_TESTDATA to the shared/testdata folder)";                      \
    }                                                                                           \
  } while (0)
