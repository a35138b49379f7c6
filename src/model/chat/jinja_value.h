// The values a chat template computes with, with the semantics of Python
// objects as Jinja2 (and transformers' apply_chat_template) sees them:
// None, bools, ints, floats, strings, lists, dicts (insertion-ordered),
// tuples, namespaces, callables, and Undefined - which prints as "",
// iterates as empty, is false, and fails loudly on anything else.
//
// Lists and dicts are immutable once built (the sandbox transformers uses
// refuses append/pop/update), so values share their storage; a namespace
// is the one mutable object ({% set ns.x = ... %}).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ork::jinja {

class Value;
using List = std::vector<Value>;
// Python dict: keys are values (strings almost always), order of insertion.
using Dict = std::vector<std::pair<Value, Value>>;

// A runtime failure of the template, with Python's own wording where the
// reference gives one ("'NoneType' object is not iterable").
struct TemplateError {
  std::string message;
  bool raised = false;  // by raise_exception(): the message is the template's own
};

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* get(size_t index, const std::string& name) const;
};
using Function = std::function<Value(const Args&)>;

struct Namespace {
  Dict attrs;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kDict, kNamespace, kFunction, kGenerator };

  Value() = default;  // Undefined
  static Value undefined(std::string hint = {});
  static Value none();
  Value(bool b);                      // NOLINT: implicit, as in Python
  Value(int64_t i);                   // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d);                    // NOLINT
  Value(std::string s);               // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  static Value list(List items);
  static Value tuple(List items);
  // What Jinja's map/select/reject filters return: iterable once, always
  // true, with no len() and no JSON form.
  static Value generator(List items);
  static Value dict(Dict items);
  static Value ns(Dict attrs);
  static Value function(std::string name, Function f);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_mapping() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kFloat ? static_cast<int64_t>(d_) : i_; }
  double as_float() const { return kind_ == Kind::kFloat ? d_ : static_cast<double>(i_); }
  const std::string& str() const { return *s_; }
  const List& items() const { return *list_; }
  const Dict& entries() const { return *dict_; }
  Namespace& namespace_object() const { return *ns_; }
  // The namespace without owning it (the interpreter's list of what to
  // empty when a render ends).
  std::weak_ptr<Namespace> namespace_weak() const { return ns_; }
  const std::string& function_name() const { return *s_; }
  Value call(const Args& args) const;
  // For Undefined: what was looked up ("'dict object' has no attribute 'x'").
  const std::string& hint() const;

  // Python's truth value (Undefined is false).
  bool truthy() const;
  // Python's type name, for messages: 'NoneType', 'str', 'dict', ...
  std::string type_name() const;
  // str(x) and repr(x), with Python's formatting of floats and strings.
  std::string to_str() const;
  std::string repr() const;

  // x[key] on a dict (Undefined if absent); attribute/item lookup is the
  // interpreter's, which knows methods.
  Value get(const Value& key) const;
  bool contains_key(const Value& key) const;
  // Python ==.
  bool equals(const Value& other) const;
  // Python <, for sort: false (with `*failed` set) where Python raises.
  bool less(const Value& other, bool* failed) const;
  // The elements of an iterable (a dict gives its keys, a string its
  // characters); fails on anything else, as Python does.
  List iterate() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;  // string, function name, undefined hint
  std::shared_ptr<const List> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<Namespace> ns_;
  std::shared_ptr<const Function> fn_;
};

// Python json.dumps as transformers' tojson calls it: insertion order,
// separators ", " and ": " (or "," and newline with indent), ensure_ascii as
// given (transformers: False), floats as repr.
std::string to_json(const Value& v, int indent, bool ensure_ascii, bool sort_keys, const std::string& item_sep,
                    const std::string& key_sep);

// repr() of a float, as Python prints it (shortest round-trip digits).
std::string float_repr(double d);

}  // namespace ork::jinja
