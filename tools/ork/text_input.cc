#include "text_input.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"

namespace ork::cli {

Result<TokenStream> tokenize_file(const Model& model, const std::string& path, size_t max_tokens) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(StatusCode::kIo, "{}: cannot read", path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return tokenize_text(model, std::move(text), max_tokens);
}

Result<TokenStream> tokenize_text(const Model& model, std::string text, size_t max_tokens) {
  ORK_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, Tokenizer::from_gguf(model.gguf()));
  TokenStream out;
  const auto chars = unicode::split_chars(text);
  out.chars_total = chars.size();
  if (tok->kind() == TokenizerKind::kSpm && tok->find("<0x41>") < 0) {
    // Characters spelled by some token, with "▁" read as a space.
    std::set<std::string> known = {" ", "\n"};
    for (int32_t id = 0; id < tok->n_vocab(); ++id) {
      // split_chars returns views into its argument: the piece must outlive the loop.
      const std::string piece = tok->piece(id);
      for (std::string_view ch : unicode::split_chars(piece)) known.insert(std::string(ch));
    }
    std::string kept;
    kept.reserve(text.size());
    for (std::string_view ch : chars) {
      if (known.count(std::string(ch)) != 0) kept.append(ch);
      else ++out.chars_dropped;
    }
    text = std::move(kept);
  }
  out.ids = tok->encode(text, /*add_special=*/true, /*parse_special=*/false);
  out.bos = tok->add_bos() ? tok->bos() : -1;
  if (max_tokens > 0 && out.ids.size() > max_tokens) out.ids.resize(max_tokens);
  return out;
}

void progress_bar(const char* label, int done, int total) {
  static const bool tty = isatty(fileno(stderr)) != 0;
  if (total <= 0) return;
  if (tty) {
    const int width = 30;
    const int fill = done * width / total;
    std::fprintf(stderr, "\r%-8s [%.*s%*s] %d/%d", label, fill, "##############################", width - fill, "",
                 done, total);
    if (done >= total) std::fputc('\n', stderr);
  } else if (done == total || (done * 10 / total) != ((done - 1) * 10 / total)) {
    std::fprintf(stderr, "%s: %d/%d\n", label, done, total);
  }
  std::fflush(stderr);
}

}  // namespace ork::cli
