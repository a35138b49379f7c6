// Fuzz target for the GGUF reader and everything that consumes its
// metadata: model binding, tokenizer construction and dequantization.
// Built as a libFuzzer target with clang (-DORK_BUILD_FUZZERS=ON) and as a
// replay driver for the regression corpus in every build.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/gguf/dequant.h"
#include "format/gguf/gguf.h"
#include "model/model.h"
#include "model/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ork;
  auto gguf = GgufFile::parse(MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf"));
  if (!gguf.is_ok()) return 0;
  // Every tensor the reader accepted must be readable in full.
  std::vector<float> out;
  for (const GgufTensorInfo& t : gguf->tensors()) {
    if (!can_dequantize(t.type) || t.elems > (1u << 20)) continue;
    out.resize(t.elems);
    (void)dequantize(t.type, t.data, out.data(), static_cast<int64_t>(t.elems));
  }
  auto tokenizer = Tokenizer::from_gguf(*gguf);
  if (tokenizer.is_ok()) {
    const auto ids = (*tokenizer)->encode("Hello world, \xC3\xA9t\xC3\xA9 123 <s>", true, true);
    (void)(*tokenizer)->decode(ids);
  }
  (void)Model::load(std::move(gguf).value());
  return 0;
}
