// SentencePiece-style tokenization (llama.cpp's "llama" vocabulary): merge
// the adjacent pair whose merged text is a token with the highest score.
// Merges only ever form tokens, so a final piece that is not a token is a
// single character: it becomes its byte-fallback tokens (<0xXX>).
#include "model/tokenizer/pair_merge.h"
#include "model/tokenizer/tokenizer.h"

namespace ork {

void Tokenizer::byte_fallback(uint8_t byte, std::vector<int32_t>& out) const {
  int32_t id = byte_tokens_.empty() ? -1 : byte_tokens_[byte];
  if (id < 0) id = find(std::string(1, static_cast<char>(byte)));
  if (id < 0) id = unk_;
  if (id >= 0) out.push_back(id);
}

void Tokenizer::encode_spm(const std::string& text, std::vector<int32_t>& out) const {
  const auto symbols = merge_pairs(text, [&](std::string_view l, std::string_view r) -> std::optional<double> {
    const int32_t id = find(std::string(l.data(), l.size() + r.size()));
    if (id < 0) return std::nullopt;
    return scores_[static_cast<size_t>(id)];
  });
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const std::string_view piece = symbols[static_cast<size_t>(i)].text;
    const int32_t id = find(std::string(piece));
    if (id >= 0) {
      out.push_back(id);
    } else {
      for (char c : piece) byte_fallback(static_cast<uint8_t>(c), out);
    }
  }
}

}  // namespace ork
