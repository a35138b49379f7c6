#include "model/chat/jinja_value.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "model/tokenizer/unicode.h"

namespace ork::jinja {
namespace {

// The code point of the n-byte UTF-8 sequence at p (a malformed one: its
// first byte).
uint32_t decode_utf8(const char* p, size_t n) {
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(p[i])); };
  if (n == 1) return b(0);
  if (n == 2) return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
  if (n == 3) return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

}  // namespace

const Value* Args::get(size_t index, const std::string& name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return index < positional.size() ? &positional[index] : nullptr;
}

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value::Value(bool b) : kind_(Kind::kBool), b_(b), i_(b ? 1 : 0) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double d) : kind_(Kind::kFloat), d_(d) {}
Value::Value(std::string s) : kind_(Kind::kString), s_(std::make_shared<const std::string>(std::move(s))) {}

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::generator(List items) {
  Value v = list(std::move(items));
  v.kind_ = Kind::kGenerator;
  return v;
}

Value Value::dict(Dict items) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<const Dict>(std::move(items));
  return v;
}

Value Value::ns(Dict attrs) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.ns_ = std::make_shared<Namespace>();
  v.ns_->attrs = std::move(attrs);
  return v;
}

Value Value::function(std::string name, Function f) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  v.fn_ = std::make_shared<const Function>(std::move(f));
  return v;
}

Value Value::call(const Args& args) const { return (*fn_)(args); }

const std::string& Value::hint() const {
  static const std::string kEmpty;
  return kind_ == Kind::kUndefined && s_ ? *s_ : kEmpty;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return d_ != 0.0;
    case Kind::kString: return !s_->empty();
    case Kind::kList:
    case Kind::kTuple: return !list_->empty();
    case Kind::kDict: return !dict_->empty();
    case Kind::kNamespace:
    case Kind::kFunction:
    case Kind::kGenerator: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kTuple: return "tuple";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kFunction: return "function";
    case Kind::kGenerator: return "generator";
  }
  return "object";
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest digits that round-trip, laid out as Python's repr: fixed
  // notation for exponents -4..15, else d.ddde+XX; always a '.' or 'e'.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ex[16];
    std::snprintf(ex, sizeof ex, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += ex;
  }
  return negative ? "-" + out : out;
}

namespace {

// Python's str.isprintable() for one code point.
bool printable(uint32_t c) {
  if (c == ' ') return true;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR: return false;
    default: return true;
  }
}

std::string str_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::min(unicode::utf8_len(static_cast<uint8_t>(s[i])), s.size() - i);
    const uint32_t c = decode_utf8(s.data() + i, n);
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (!printable(c)) {
      char buf[16];
      std::snprintf(buf, sizeof buf, c < 0x100 ? "\\x%02x" : c < 0x10000 ? "\\u%04x" : "\\U%08x", c);
      out += buf;
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  return out + quote;
}

}  // namespace

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return float_repr(d_);
    case Kind::kString: return *s_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kString: return str_repr(*s_);
    case Kind::kList:
    case Kind::kTuple: {
      std::string out = kind_ == Kind::kList ? "[" : "(";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      if (kind_ == Kind::kTuple && list_->size() == 1) out += ",";
      return out + (kind_ == Kind::kList ? "]" : ")");
    }
    case Kind::kDict: {
      std::string out = "{";
      for (size_t i = 0; i < dict_->size(); ++i) {
        out += (i ? ", " : "") + (*dict_)[i].first.repr() + ": " + (*dict_)[i].second.repr();
      }
      return out + "}";
    }
    case Kind::kNamespace: return "<Namespace>";
    case Kind::kFunction: return "<function " + *s_ + ">";
    case Kind::kGenerator: return "<generator object>";
    default: return to_str();
  }
}

Value Value::get(const Value& key) const {
  if (kind_ != Kind::kDict) return undefined();
  for (const auto& [k, v] : *dict_) {
    if (k.equals(key)) return v;
  }
  return undefined();
}

bool Value::contains_key(const Value& key) const {
  if (kind_ != Kind::kDict) return false;
  return std::any_of(dict_->begin(), dict_->end(), [&](const auto& kv) { return kv.first.equals(key); });
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::kFloat || o.kind_ == Kind::kFloat) return as_float() == o.as_float();
    return i_ == o.i_;
  }
  if (kind_ != o.kind_) {
    // A list never equals a tuple in Python; nothing else mixes either.
    return false;
  }
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return *s_ == *o.s_;
    case Kind::kList:
    case Kind::kTuple:
      return list_->size() == o.list_->size() &&
             std::equal(list_->begin(), list_->end(), o.list_->begin(), [](const Value& a, const Value& b) { return a.equals(b); });
    case Kind::kDict: {
      if (dict_->size() != o.dict_->size()) return false;
      for (const auto& [k, v] : *dict_) {
        if (!o.contains_key(k) || !o.get(k).equals(v)) return false;
      }
      return true;
    }
    case Kind::kNamespace: return ns_ == o.ns_;
    case Kind::kFunction: return fn_ == o.fn_;
    default: return false;
  }
}

bool Value::less(const Value& o, bool* failed) const {
  if (is_number() && o.is_number()) return as_float() < o.as_float();
  if (kind_ == Kind::kString && o.kind_ == Kind::kString) return *s_ < *o.s_;  // UTF-8 bytes sort as code points
  if (is_sequence() && o.kind_ == kind_) {
    const List &a = *list_, &b = *o.list_;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (a[i].less(b[i], failed)) return true;
      if (b[i].less(a[i], failed)) return false;
    }
    return a.size() < b.size();
  }
  *failed = true;
  return false;
}

List Value::iterate() const {
  switch (kind_) {
    case Kind::kUndefined: return {};
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kGenerator: return *list_;
    case Kind::kDict: {
      List keys;
      for (const auto& kv : *dict_) keys.push_back(kv.first);
      return keys;
    }
    case Kind::kString: {
      List chars;
      for (std::string_view c : unicode::split_chars(*s_)) chars.emplace_back(std::string(c));
      return chars;
    }
    default: throw TemplateError{"'" + type_name() + "' object is not iterable"};
  }
}

namespace {

void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = std::min(unicode::utf8_len(b), s.size() - i);
    const uint32_t c = decode_utf8(s.data() + i, n);
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
          if (c >= 0x10000) {
            const uint32_t v = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
          }
          out += buf;
        } else {
          out.append(s, i, n);
        }
    }
    i += n;
  }
  out += '"';
}

void dump(const Value& v, int indent, int depth, bool ascii, bool sort_keys, const std::string& item_sep,
          const std::string& key_sep, std::string& out) {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      const double d = v.as_float();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
      return;
    }
    case Value::Kind::kString: json_string(v.str(), ascii, out); return;
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const List& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        dump(items[i], indent, depth + 1, ascii, sort_keys, item_sep, key_sep, out);
      }
      newline(depth);
      out += "]";
      return;
    }
    case Value::Kind::kDict: {
      Dict entries = v.entries();
      if (entries.empty()) {
        out += "{}";
        return;
      }
      // JSON keys are strings: Python's json writes ints, floats, bools and None by their JSON text.
      auto key_text = [&](const Value& k) -> std::string {
        if (k.is_string()) return k.str();
        if (k.kind() == Value::Kind::kBool) return k.as_bool() ? "true" : "false";
        if (k.is_none()) return "null";
        if (k.is_number()) return k.kind() == Value::Kind::kFloat ? float_repr(k.as_float()) : std::to_string(k.as_int());
        throw TemplateError{"keys must be str, int, float, bool or None, not " + k.type_name()};
      };
      if (sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [&](const auto& a, const auto& b) { return key_text(a.first) < key_text(b.first); });
      }
      out += "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_string(key_text(entries[i].first), ascii, out);
        out += key_sep;
        dump(entries[i].second, indent, depth + 1, ascii, sort_keys, item_sep, key_sep, out);
      }
      newline(depth);
      out += "}";
      return;
    }
    default: throw TemplateError{"Object of type " + v.type_name() + " is not JSON serializable"};
  }
}

}  // namespace

std::string to_json(const Value& v, int indent, bool ensure_ascii, bool sort_keys, const std::string& item_sep,
                    const std::string& key_sep) {
  std::string out;
  dump(v, indent, 0, ensure_ascii, sort_keys, item_sep, key_sep, out);
  return out;
}

}  // namespace ork::jinja
