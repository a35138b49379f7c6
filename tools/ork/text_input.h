// Text files as token streams for the CLI's measuring commands (ppl,
// imatrix, pack --calib), and a progress bar for long work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"
#include "ork/status.h"

namespace ork::cli {

struct TokenStream {
  std::vector<int32_t> ids;
  int32_t bos = -1;             // -1 when the vocabulary adds none
  size_t chars_dropped = 0;     // characters the vocabulary cannot spell, deleted
  size_t chars_total = 0;
};

// Tokenizes a text file (at most max_tokens; 0 = all). A vocabulary without
// byte-fallback tokens cannot spell every character: those characters are
// deleted first and counted, as llama.cpp's reference figures did by hand.
Result<TokenStream> tokenize_file(const Model& model, const std::string& path, size_t max_tokens = 0);
// The same for a text in memory.
Result<TokenStream> tokenize_text(const Model& model, std::string text, size_t max_tokens = 0);

// "label [#####     ] 12/40" on stderr, redrawn in place on a terminal,
// printed at 10 % steps otherwise.
void progress_bar(const char* label, int done, int total);

}  // namespace ork::cli
