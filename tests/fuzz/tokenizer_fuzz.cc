// Fuzz target for tokenizer input: arbitrary bytes (broken UTF-8, control
// tokens spelled in the text, huge runs) through every tokenizer kind. The
// first byte picks the vocabulary. Every id encode returns must be in the
// vocabulary, and decode must accept them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "format/gguf/gguf.h"
#include "model/tokenizer/tokenizer.h"

namespace {

using ork::Tokenizer;

// Vocabularies from the fuzz corpus (always there) and, where the shared
// test data is beside the checkout, real ones of each kind.
std::vector<std::unique_ptr<Tokenizer>> load_vocabularies() {
  const std::string src = ORK_SOURCE_DIR;
  const char* env = std::getenv("ORK_TESTDATA");
  const std::string td = env != nullptr ? env : src + "/../shared/testdata";
  std::vector<std::unique_ptr<Tokenizer>> out;
  for (const std::string& path :
       {src + "/tests/fuzz/gguf_corpus/synth_llama.gguf", src + "/tests/fuzz/gguf_corpus/bpe_vocab.gguf",
        td + "/models/stories260K-f32.gguf", td + "/models/tinystories656K-f32.gguf",
        td + "/vocab/ggml-vocab-llama-spm.gguf", td + "/fixtures/vocab/ggml-vocab-qwen2.gguf",
        td + "/fixtures/vocab/ggml-vocab-llama-bpe.gguf", td + "/vocab/ggml-vocab-gpt-2.gguf",
        td + "/vocab/ggml-vocab-bert-bge.gguf"}) {
    auto gguf = ork::GgufFile::open(path);
    if (!gguf.is_ok()) continue;
    auto tok = Tokenizer::from_gguf(*gguf);
    if (tok.is_ok()) out.push_back(std::move(tok).value());
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::unique_ptr<Tokenizer>> vocabularies = load_vocabularies();
  if (size == 0 || vocabularies.empty()) return 0;
  const Tokenizer& tok = *vocabularies[data[0] % vocabularies.size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = tok.encode(text, special, special);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.n_vocab()) std::abort();
    }
    (void)tok.decode(ids, special);
  }
  return 0;
}
