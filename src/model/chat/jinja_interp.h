// Renders a parsed chat template (jinja_parser.h) with Jinja2's semantics
// as transformers' apply_chat_template uses them: an immutable sandbox
// (lists and dicts cannot be changed; namespace() objects can), lenient
// Undefined, Python's str() of values, and the globals raise_exception,
// strftime_now, namespace and range.
#pragma once

#include <ctime>
#include <map>
#include <optional>
#include <string>

#include "model/chat/jinja_ast.h"

namespace ork::jinja {

struct RenderOptions {
  // strftime_now()'s time (unset: now, local time).
  std::optional<std::tm> now;
  // Limits, so that no template can hang or exhaust the process: steps
  // (statements executed: every reference case of ../shared/testdata/
  // templates takes under 20 000; a million is about 2 s), output bytes,
  // macro depth.
  int64_t max_steps = 1'000'000;
  size_t max_output = size_t{64} << 20;
  int max_depth = 200;
};

// Throws TemplateError: raised by the template (raise_exception, `raised`
// set and the message its own), or a runtime failure ("line N: ...").
std::string render(const Body& program, const std::map<std::string, Value>& variables, const RenderOptions& options);

// The built-in filters and tests, and the methods of strings, dicts and
// lists (jinja_builtins.cc). Each throws TemplateError on bad arguments.
Value apply_filter(const std::string& name, const Value& v, const Args& args,
                   const std::function<Value(const Value&, const std::string& attr)>& getattr);
bool apply_test(const std::string& name, const Value& v, const Args& args);
bool has_filter(const std::string& name);
bool has_test(const std::string& name);
// A method of a str, dict or list value bound to it; Undefined if it has
// none of that name; throws for list/dict methods the sandbox refuses.
Value method_of(const Value& v, const std::string& name);
// Python's printf-style `%` on a string (%s %d %i %r %%): the `%`
// operator and the `format` filter.
std::string percent_format(const std::string& f, const List& values);

}  // namespace ork::jinja
