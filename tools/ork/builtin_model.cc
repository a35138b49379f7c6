#include "builtin_model.h"

#include <cstdio>
#include <vector>

// The GGUF's bytes, placed in the binary's read-only data by the assembler
// (.incbin): no generated source, and the file is read at build time only.
// ORK_BUILTIN_MODEL is its absolute path, from CMake.
asm(".section .rodata\n"
    ".balign 64\n"
    ".global ork_builtin_model_begin\n"
    "ork_builtin_model_begin:\n"
    ".incbin \"" ORK_BUILTIN_MODEL "\"\n"
    ".global ork_builtin_model_end\n"
    "ork_builtin_model_end:\n"
    ".previous\n");
extern "C" const unsigned char ork_builtin_model_begin[];
extern "C" const unsigned char ork_builtin_model_end[];

namespace ork::cli {

namespace {

void announce() {
  std::fprintf(stderr,
               "ork: no model given (-m): using the built-in stories260K, a 260K-parameter Llama trained on "
               "TinyStories\n     (karpathy/tinyllamas, MIT licence). Pass -m model.gguf to run your own.\n");
}

}  // namespace

Result<std::unique_ptr<api::LoadedModel>> load_builtin_api_model() {
  announce();
  return api::LoadedModel::from_bytes(std::vector<uint8_t>(ork_builtin_model_begin, ork_builtin_model_end),
                                      kBuiltinModelName);
}

Result<std::unique_ptr<Model>> load_builtin_model() {
  announce();
  std::vector<uint8_t> bytes(ork_builtin_model_begin, ork_builtin_model_end);
  ORK_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::parse(MappedFile::from_bytes(std::move(bytes), kBuiltinModelName)));
  return Model::load(std::move(gguf));
}

}  // namespace ork::cli
