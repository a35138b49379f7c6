// Splits a chat template into text and the tokens of its tags, with
// Jinja2's whitespace rules as transformers configures them: newlines
// normalised and one trailing newline dropped, trim_blocks (the newline
// after a block or comment tag goes), lstrip_blocks (spaces and tabs before
// a block or comment tag at the start of a line go), and the '-' and '+'
// markers on either side of a tag.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ork::jinja {

struct Token {
  enum class Kind { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind;
  std::string text;  // text, name, operator, or a string literal's value
  int line = 1;
};

// Throws TemplateError ("line N: ...") on a tag that does not end, a bad
// string literal or a character no token begins with.
std::vector<Token> lex(std::string_view source);

}  // namespace ork::jinja
