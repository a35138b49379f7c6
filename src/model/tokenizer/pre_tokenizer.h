// The regex pre-tokenizers of byte-level BPE vocabularies. Each variant is
// a list of regexes applied in turn; every regex splits each current piece
// into its matches and the text between them (both kept), as llama.cpp and
// Hugging Face's "Split, isolated" behaviour do.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ork/status.h"

namespace ork {

class PreTokenizer {
 public:
  ~PreTokenizer();
  // `name` is tokenizer.ggml.pre ("" or "default" for the generic one).
  static Result<std::unique_ptr<PreTokenizer>> create(const std::string& name);
  // Names this build knows, for error messages.
  static std::string known_names();

  std::vector<std::string> split(std::string_view text) const;

 private:
  PreTokenizer() = default;
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace ork
