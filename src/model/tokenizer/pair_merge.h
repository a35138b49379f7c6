// The merge loop SentencePiece and byte-level BPE share: text starts as one
// symbol per UTF-8 character; the adjacent pair with the highest priority
// (leftmost on ties) merges, its neighbours' pairs are re-scored, until no
// pair has a priority. The two tokenizers differ only in that priority.
#pragma once

#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "model/tokenizer/unicode.h"

namespace ork {

struct MergeSymbol {
  int prev;
  int next;
  std::string_view text;  // empty once merged into its left neighbour
};

// `priority(left, right)` returns nullopt when the pair must not merge. The
// two views are adjacent in `text`: string_view(left.data(), left.size() +
// right.size()) is the merged text.
// Returns the symbols as a linked list from index 0 (skip empty ones).
template <typename PriorityFn>
std::vector<MergeSymbol> merge_pairs(std::string_view text, PriorityFn priority) {
  std::vector<MergeSymbol> symbols;
  for (std::string_view ch : unicode::split_chars(text)) {
    const int i = static_cast<int>(symbols.size());
    symbols.push_back({i - 1, i + 1, ch});
  }
  if (symbols.empty()) return symbols;
  symbols.back().next = -1;

  struct Pair {
    int left;
    int right;
    double priority;
    size_t size;
    bool operator<(const Pair& o) const {  // the queue pops the largest
      return priority < o.priority || (priority == o.priority && left > o.left);
    }
  };
  std::priority_queue<Pair> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view l = symbols[static_cast<size_t>(left)].text;
    const std::string_view r = symbols[static_cast<size_t>(right)].text;
    if (const std::optional<double> p = priority(l, r)) queue.push({left, right, *p, l.size() + r.size()});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    MergeSymbol& left = symbols[static_cast<size_t>(p.left)];
    MergeSymbol& right = symbols[static_cast<size_t>(p.right)];
    // Stale when either side has merged with something else since: symbols
    // are views of one string, so equal sizes mean the same text.
    if (left.text.empty() || right.text.empty() || left.text.size() + right.text.size() != p.size) continue;
    left.text = std::string_view(left.text.data(), p.size);
    right.text = {};
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = p.left;
    try_add(left.prev, p.left);
    try_add(p.left, left.next);
  }
  return symbols;
}

}  // namespace ork
