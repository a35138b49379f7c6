// Byte-level BPE (llama.cpp's "gpt2" vocabulary): each pre-token, already
// mapped to GPT-2's printable byte characters, merges the adjacent pair
// with the lowest merge rank first. Pieces that are not tokens fall back to
// one token per byte.
#include "model/tokenizer/pair_merge.h"
#include "model/tokenizer/tokenizer.h"

namespace ork {

int Tokenizer::bpe_rank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left).append(" ").append(right);
  const auto it = merge_ranks_.find(key);
  return it == merge_ranks_.end() ? -1 : it->second;
}

void Tokenizer::encode_bpe_word(const std::string& word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    const int32_t id = find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  const auto symbols = merge_pairs(word, [&](std::string_view l, std::string_view r) -> std::optional<double> {
    const int rank = bpe_rank(l, r);
    if (rank < 0) return std::nullopt;
    return -static_cast<double>(rank);  // lowest rank merges first
  });
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const std::string piece(symbols[static_cast<size_t>(i)].text);
    const int32_t id = find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t byte_id = find(std::string(1, c));
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

}  // namespace ork
