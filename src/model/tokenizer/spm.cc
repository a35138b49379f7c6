// SentencePiece-style tokenization (llama.cpp's "llama" vocabulary): start
// from UTF-8 characters, repeatedly merge the adjacent pair whose merged
// text is a token with the highest score (leftmost on ties), then emit each
// piece. Merges only ever form tokens, so a piece that is not a token is a
// single character: it becomes its byte-fallback tokens (<0xXX>).
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
  float score;
  size_t size;
  bool operator<(const Bigram& o) const {  // priority_queue pops the largest
    return score < o.score || (score == o.score && left > o.left);
  }
};

}  // namespace

void Tokenizer::byte_fallback(uint8_t byte, std::vector<int32_t>& out) const {
  int32_t id = byte_tokens_.empty() ? -1 : byte_tokens_[byte];
  if (id < 0) id = find(std::string(1, static_cast<char>(byte)));
  if (id < 0) id = unk_;
  if (id >= 0) out.push_back(id);
}

void Tokenizer::encode_spm(const std::string& text, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  for (std::string_view ch : unicode::split_chars(text)) {
    const int i = static_cast<int>(symbols.size());
    symbols.push_back({i - 1, i + 1, ch});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Bigram> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view merged(symbols[left].text.data(), symbols[left].text.size() + symbols[right].text.size());
    const int32_t id = find(std::string(merged));
    if (id < 0) return;
    queue.push({left, right, scores_[static_cast<size_t>(id)], merged.size()});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(b.left)];
    Symbol& right = symbols[static_cast<size_t>(b.right)];
    if (left.text.empty() || right.text.empty() || left.text.size() + right.text.size() != b.size) continue;
    left.text = std::string_view(left.text.data(), b.size);
    right.text = {};
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }

  for (int i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
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
