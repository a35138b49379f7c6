// api::TextStream: generated pieces to text a user may be shown - whole
// UTF-8 characters, nothing that may still turn into a stop string.
#include <algorithm>

#include "model/tokenizer/unicode.h"
#include "ork/ork.hpp"

namespace ork::api {
namespace {

// How many bytes at the end of `text` begin some stop string (and so may
// not be shown yet).
size_t stop_prefix_at_end(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& s : stops) {
    for (size_t n = std::min(s.size() - 1, text.size()); n > hold; --n) {
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}

// Bytes of `text` from `from` that end on a whole UTF-8 character.
size_t complete_utf8(const std::string& text, size_t from) {
  size_t at = from, ok = from;
  while (at < text.size()) {
    const size_t n = unicode::utf8_len(static_cast<uint8_t>(text[at]));
    if (at + n > text.size()) break;
    at += n;
    ok = at;
  }
  return ok;
}

}  // namespace

TextStream::TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {
  std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
}

std::string_view TextStream::show(size_t upto) {
  if (upto <= shown_) return {};
  const std::string_view out = std::string_view(text_).substr(shown_, upto - shown_);
  shown_ = upto;
  return out;
}

std::string_view TextStream::push(std::string_view piece) {
  if (stopped_) return {};
  text_ += piece;
  // A stop string may straddle pieces: search from where it could begin.
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) {
    const size_t at = text_.find(s, shown_ > s.size() ? shown_ - s.size() : 0);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    text_.resize(std::max(cut, shown_));
    return show(text_.size());
  }
  const size_t hold = stop_prefix_at_end(text_, stop_);
  return show(std::min(complete_utf8(text_, shown_), text_.size() - hold));
}

std::string_view TextStream::finish() { return stopped_ ? std::string_view() : show(text_.size()); }

}  // namespace ork::api
