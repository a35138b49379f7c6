// Fuzz target for importance matrices (`ork pack --imatrix FILE`): the
// GGUF reader, then the importance-matrix checks (F32 vectors and square
// matrices, finite, non-negative, known suffixes) on whatever it accepts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "format/gguf/gguf.h"
#include "quant/imatrix.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ork;
  auto gguf = GgufFile::parse(MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.imatrix"));
  if (!gguf.is_ok()) return 0;
  auto m = ImportanceMatrix::parse(*gguf);
  if (!m.is_ok()) return 0;
  for (const auto& [name, v] : m->entries()) {
    for (float x : v.raw) {
      if (!(x >= 0.0f)) std::abort();
    }
    if (!v.cov_lower.empty() && v.cov_lower.size() != ImportanceVectors::lower_size(static_cast<int64_t>(v.raw.size()))) {
      std::abort();
    }
  }
  return 0;
}
