#include "core/escape.h"

#include <fmt/format.h>

namespace ork {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 (RFC 3629: no overlong
// forms, no surrogates, nothing past U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return n;
}

std::string escape(std::string_view s, bool keep_whitespace) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_sequence(s, i);
    const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0;  // U+0080..U+009F
    const bool control = n == 1 && (c < 0x20 || c == 0x7F) && !(keep_whitespace && (c == '\t' || c == '\n' || c == '\r'));
    if (n == 0 || control) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else if (c1) {
      out += fmt::format("\\x{:02x}\\x{:02x}", c, static_cast<unsigned char>(s[i + 1]));
      i += 2;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace

std::string escape_text(std::string_view text) { return escape(text, false); }
std::string escape_stream_text(std::string_view text) { return escape(text, true); }

}  // namespace ork
