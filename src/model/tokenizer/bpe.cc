// Byte-level BPE (llama.cpp's "gpt2" vocabulary): each pre-token, already
// mapped to GPT-2's printable byte characters, starts as characters and
// repeatedly merges the adjacent pair with the lowest merge rank (leftmost
// on ties). Pieces that are not tokens fall back to one token per byte.
#include <queue>

#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"

namespace ork {
namespace {

struct Symbol {
  int prev;
  int next;
  std::string_view text;
};

struct Bigram {
  int left;
  int right;
  int rank;
  std::string text;
  bool operator<(const Bigram& o) const {  // priority_queue pops the largest: lowest rank first
    return rank > o.rank || (rank == o.rank && left > o.left);
  }
};

}  // namespace

int Tokenizer::bpe_rank(const std::string& left, const std::string& right) const {
  const auto it = merge_ranks_.find(left + " " + right);
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
  std::vector<Symbol> symbols;
  for (std::string_view ch : unicode::split_chars(word)) {
    const int i = static_cast<int>(symbols.size());
    symbols.push_back({i - 1, i + 1, ch});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Bigram> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string l(symbols[static_cast<size_t>(left)].text);
    const std::string r(symbols[static_cast<size_t>(right)].text);
    const int rank = bpe_rank(l, r);
    if (rank < 0) return;
    queue.push({left, right, rank, l + r});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(b.left)];
    Symbol& right = symbols[static_cast<size_t>(b.right)];
    if (left.text.empty() || right.text.empty()) continue;
    if (left.text.size() + right.text.size() != b.text.size() ||
        std::string(left.text) + std::string(right.text) != b.text) {
      continue;  // stale: one side was merged with something else since
    }
    left.text = std::string_view(left.text.data(), b.text.size());
    right.text = {};
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }

  for (int i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
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
