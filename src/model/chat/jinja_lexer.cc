#include "model/chat/jinja_lexer.h"

#include <cctype>
#include <cstring>

#include "model/chat/jinja_value.h"
#include "model/tokenizer/unicode.h"

namespace ork::jinja {
namespace {

[[noreturn]] void fail(int line, const std::string& what) { throw TemplateError{"line " + std::to_string(line) + ": " + what}; }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  explicit Lexer(std::string source) : s_(std::move(source)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text = s_.substr(pos_, tag - pos_);
      if (tag == s_.size()) {
        emit_text(std::move(text), line_at(pos_));
        break;
      }
      const char type = s_[tag + 1];  // '{', '%' or '#'
      const char mod = tag + 2 < s_.size() ? s_[tag + 2] : '\0';
      if (mod == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (mod != '+' && (type == '%' || type == '#')) {
        // lstrip_blocks: only spaces and tabs between the line's start and the tag.
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((l_pos > 0 || line_starting) && text.find_first_not_of(" \t", l_pos) == std::string::npos) text.resize(l_pos);
      }
      emit_text(std::move(text), line_at(pos_));
      pos_ = tag + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      bool strip_after = false, trimmed = false;
      if (type == '#') {
        const size_t end = s_.find("#}", pos_);
        if (end == std::string::npos) fail(line_at(tag), "a comment is not closed ('#}')");
        strip_after = end > pos_ && s_[end - 1] == '-';
        pos_ = end + 2;
      } else if (type == '%' && raw_block()) {
        continue;
      } else {
        const bool block = type == '%';
        tokens_.push_back({block ? Token::Kind::kBlockBegin : Token::Kind::kVarBegin, "", line_at(tag)});
        strip_after = tag_tokens(block ? '%' : '}', line_at(tag));
        tokens_.push_back({block ? Token::Kind::kBlockEnd : Token::Kind::kVarEnd, "", line_at(pos_)});
      }
      if (strip_after) {
        const size_t from = pos_;
        while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
        trimmed = pos_ > from && s_[pos_ - 1] == '\n';
      } else if (type != '{' && pos_ < s_.size() && s_[pos_] == '\n') {
        ++pos_;  // trim_blocks
        trimmed = true;
      }
      line_starting = trimmed;
    }
    tokens_.push_back({Token::Kind::kEnd, "", line_at(s_.size())});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i) {
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return s_.size();
  }

  int line_at(size_t at) {
    // Lines are counted forward only (positions only grow).
    for (; counted_ < at && counted_ < s_.size(); ++counted_) line_ += s_[counted_] == '\n';
    return line_;
  }

  void emit_text(std::string text, int line) {
    if (!text.empty()) tokens_.push_back({Token::Kind::kText, std::move(text), line});
  }

  // {% raw %} ... {% endraw %}: the body verbatim. Called with pos_ just
  // inside "{%"; false (nothing consumed) when this is another tag.
  bool raw_block() {
    size_t p = pos_;
    while (p < s_.size() && is_space(s_[p])) ++p;
    if (s_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < s_.size() && is_space(s_[p])) ++p;
    if (s_.compare(p, 2, "%}") != 0 && s_.compare(p, 3, "-%}") != 0) return false;
    const bool strip = s_[p] == '-';
    p += strip ? 3 : 2;
    if (strip) {
      while (p < s_.size() && is_space(s_[p])) ++p;
    } else if (p < s_.size() && s_[p] == '\n') {
      ++p;
    }
    for (size_t q = p; (q = s_.find("{%", q)) != std::string::npos; q += 2) {
      size_t r = q + 2 + (q + 2 < s_.size() && (s_[q + 2] == '-' || s_[q + 2] == '+'));
      while (r < s_.size() && is_space(s_[r])) ++r;
      if (s_.compare(r, 6, "endraw") != 0) continue;
      std::string body = s_.substr(p, q - p);
      if (s_[q + 2] == '-') {
        while (!body.empty() && is_space(body.back())) body.pop_back();
      }
      emit_text(std::move(body), line_at(p));
      r += 6;
      while (r < s_.size() && is_space(s_[r])) ++r;
      const bool strip_end = s_.compare(r, 3, "-%}") == 0;
      if (!strip_end && s_.compare(r, 2, "%}") != 0) fail(line_at(r), "'endraw' tag is not closed");
      pos_ = r + (strip_end ? 3 : 2);
      if (strip_end) {
        while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
      } else if (pos_ < s_.size() && s_[pos_] == '\n') {
        ++pos_;
      }
      return true;
    }
    fail(line_at(pos_), "'raw' block is not closed ('{% endraw %}')");
  }

  // The tokens of one tag up to its end ("%}" or "}}"); whether it ended
  // with '-' (strip the whitespace after it).
  bool tag_tokens(char close, int start_line) {
    for (;;) {
      while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
      if (pos_ >= s_.size()) fail(start_line, close == '%' ? "a block tag is not closed ('%}')" : "an expression is not closed ('}}')");
      const char c = s_[pos_];
      const char d = pos_ + 1 < s_.size() ? s_[pos_ + 1] : '\0';
      const char e = pos_ + 2 < s_.size() ? s_[pos_ + 2] : '\0';
      if (c == close && d == '}') {
        pos_ += 2;
        return false;
      }
      if (c == '-' && d == close && e == '}') {
        pos_ += 3;
        return true;
      }
      if ((c == '+' && d == close && e == '}')) {
        pos_ += 3;
        return false;
      }
      const int line = line_at(pos_);
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t end = pos_ + 1;
        while (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) ++end;
        tokens_.push_back({Token::Kind::kName, s_.substr(pos_, end - pos_), line});
        pos_ = end;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number(line);
      } else if (c == '\'' || c == '"') {
        string_literal(line);
      } else {
        static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                     "=",  "(",  ")",  "[",  "]",  "{",  "}", ",", ".", ":", "|"};
        bool found = false;
        for (const char* op : kOps) {
          const size_t n = std::strlen(op);
          if (s_.compare(pos_, n, op) == 0) {
            tokens_.push_back({Token::Kind::kOp, op, line});
            pos_ += n;
            found = true;
            break;
          }
        }
        if (!found) fail(line, std::string("unexpected character '") + c + "'");
      }
    }
  }

  void number(int line) {
    size_t end = pos_;
    while (end < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) ++end;
    bool is_float = false;
    if (end + 1 < s_.size() && s_[end] == '.' && std::isdigit(static_cast<unsigned char>(s_[end + 1]))) {
      is_float = true;
      ++end;
      while (end < s_.size() && std::isdigit(static_cast<unsigned char>(s_[end]))) ++end;
    }
    if (end < s_.size() && (s_[end] == 'e' || s_[end] == 'E')) {
      size_t e = end + 1;
      if (e < s_.size() && (s_[e] == '+' || s_[e] == '-')) ++e;
      if (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) {
        is_float = true;
        end = e;
        while (end < s_.size() && std::isdigit(static_cast<unsigned char>(s_[end]))) ++end;
      }
    }
    std::string text;
    for (size_t i = pos_; i < end; ++i) {
      if (s_[i] != '_') text += s_[i];
    }
    tokens_.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, text, line});
    pos_ = end;
  }

  // A string literal, with Python's escapes (unicode-escape decoding: an
  // unknown escape keeps its backslash).
  void string_literal(int line) {
    const char quote = s_[pos_++];
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail(line, "a string literal is not closed");
      const char c = s_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail(line, "a string literal is not closed");
      const char e = s_[pos_++];
      auto hex = [&](int digits) {
        if (pos_ + static_cast<size_t>(digits) > s_.size()) fail(line, "truncated \\x, \\u or \\U escape");
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
          const char h = s_[pos_++];
          if (!std::isxdigit(static_cast<unsigned char>(h))) fail(line, "bad hex digit in an escape");
          v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        return v;
      };
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': break;  // a line continuation
        case 'x': unicode::append_utf8(out, hex(2)); break;
        case 'u': unicode::append_utf8(out, hex(4)); break;
        case 'U': unicode::append_utf8(out, hex(8)); break;
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = static_cast<uint32_t>(e - '0');
            for (int i = 0; i < 2 && pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '7'; ++i) v = v * 8 + static_cast<uint32_t>(s_[pos_++] - '0');
            unicode::append_utf8(out, v);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back({Token::Kind::kString, std::move(out), line});
  }

  std::string s_;
  size_t pos_ = 0;
  size_t counted_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) {
  // Jinja2 normalises every newline to "\n" and (keep_trailing_newline off)
  // drops one at the very end.
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s += source[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return Lexer(std::move(s)).run();
}

}  // namespace ork::jinja
