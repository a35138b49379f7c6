// Jinja2's built-in filters and tests (3.1, with transformers' tojson), and
// the Python methods of str, dict and list that templates call.
#include <algorithm>
#include <cmath>
#include <set>

#include "model/chat/jinja_interp.h"
#include "model/tokenizer/unicode.h"

namespace ork::jinja {
namespace {

[[noreturn]] void type_error(const std::string& what) { throw TemplateError{what}; }

// By value: a fallback is often a temporary.
Value arg(const Args& a, size_t i, const char* name, const Value& fallback) {
  const Value* v = a.get(i, name);
  return v != nullptr ? *v : fallback;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's str.strip family: whitespace, or any of `chars` (code points).
std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  const std::vector<std::string_view> cs = unicode::split_chars(s);
  std::set<std::string> set;
  const bool ws = chars.is_none() || chars.is_undefined();
  if (!ws) {
    const std::string text = chars.to_str();  // split_chars views into it
    for (std::string_view c : unicode::split_chars(text)) set.insert(std::string(c));
  }
  auto strippable = [&](std::string_view c) { return ws ? (c.size() == 1 && is_ws(c[0])) : set.count(std::string(c)) > 0; };
  size_t a = 0, b = cs.size();
  if (left) {
    while (a < b && strippable(cs[a])) ++a;
  }
  if (right) {
    while (b > a && strippable(cs[b - 1])) --b;
  }
  std::string out;
  for (size_t i = a; i < b; ++i) out += cs[i];
  return out;
}

std::string title(const std::string& s) {
  std::string out;
  bool start = true;
  for (char c : s) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    out += alpha ? static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c))) : c;
    start = !alpha && !std::isdigit(static_cast<unsigned char>(c)) && c != '\'';
  }
  return out;
}

List split(const std::string& s, const Value& sep, int64_t maxsplit) {
  List out;
  if (sep.is_none() || sep.is_undefined()) {
    // Runs of whitespace, leading and trailing ignored.
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_ws(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t end = s.size();
        while (end > i && is_ws(s[end - 1])) --end;
        out.emplace_back(s.substr(i, end - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_ws(s[j])) ++j;
      out.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string d = sep.to_str();
  if (d.empty()) type_error("empty separator");
  size_t at = 0;
  for (;;) {
    const size_t f = s.find(d, at);
    if (f == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) {
      out.emplace_back(s.substr(at));
      return out;
    }
    out.emplace_back(s.substr(at, f - at));
    at = f + d.size();
  }
}

std::string replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  if (old.empty()) {
    // Python inserts `rep` between every character (and at both ends).
    std::string out = rep;
    int64_t n = 1;
    for (std::string_view c : unicode::split_chars(s)) {
      out += c;
      if (count < 0 || n < count) {
        out += rep;
        ++n;
      }
    }
    return out;
  }
  std::string out;
  size_t at = 0;
  int64_t n = 0;
  for (;;) {
    const size_t f = s.find(old, at);
    if (f == std::string::npos || (count >= 0 && n == count)) break;
    out.append(s, at, f - at);
    out += rep;
    at = f + old.size();
    ++n;
  }
  return out + s.substr(at);
}

bool starts_or_ends(const std::string& s, const Value& what, bool start) {
  auto one = [&](const std::string& p) {
    return p.size() <= s.size() && (start ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0);
  };
  if (what.kind() == Value::Kind::kTuple || what.kind() == Value::Kind::kList) {
    for (const Value& v : what.items()) {
      if (one(v.to_str())) return true;
    }
    return false;
  }
  if (!what.is_string()) type_error(std::string(start ? "startswith" : "endswith") + " first arg must be str or a tuple of str, not " + what.type_name());
  return one(what.str());
}

int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(unicode::split_chars(v.str()).size());
    case Value::Kind::kList:
    case Value::Kind::kTuple: return static_cast<int64_t>(v.items().size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.entries().size());
    default: type_error("object of type '" + v.type_name() + "' has no len()");
  }
}

using GetAttr = std::function<Value(const Value&, const std::string&)>;

// attribute='a.b' as Jinja's make_attrgetter reads it (dotted, ints as indices).
Value attribute_of(const Value& item, const std::string& path, const GetAttr& getattr) {
  Value v = item;
  size_t at = 0;
  for (;;) {
    const size_t dot = path.find('.', at);
    const std::string part = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    if (v.is_mapping() && v.contains_key(Value(part))) {
      v = v.get(Value(part));
    } else if (!part.empty() && std::all_of(part.begin(), part.end(), ::isdigit) && v.is_sequence()) {
      const auto i = static_cast<size_t>(std::stoll(part));
      v = i < v.items().size() ? v.items()[i] : Value::undefined();
    } else if (v.is_undefined()) {
      return v;
    } else {
      v = getattr(v, part);
    }
    if (dot == std::string::npos) return v;
    at = dot + 1;
  }
}

// select/reject/selectattr/rejectattr: the test named in the arguments.
List select(const Value& seq, const Args& a, bool by_attr, bool keep, const GetAttr& getattr) {
  List out;
  if (!seq.truthy()) return out;  // Jinja: `if value:` - None selects nothing
  size_t first = 0;
  std::string attr;
  if (by_attr) {
    if (a.positional.empty()) type_error("selectattr needs an attribute");
    attr = a.positional[0].to_str();
    first = 1;
  }
  std::string test;
  Args test_args;
  if (a.positional.size() > first) {
    test = a.positional[first].to_str();
    test_args.positional.assign(a.positional.begin() + static_cast<long>(first) + 1, a.positional.end());
  }
  for (const Value& item : seq.iterate()) {
    const Value v = by_attr ? attribute_of(item, attr, getattr) : item;
    const bool pass = test.empty() ? v.truthy() : apply_test(test, v, test_args);
    if (pass == keep) out.push_back(item);
  }
  return out;
}

Value sorted(List items, bool reverse, bool case_sensitive, const std::string& attr, const GetAttr& getattr) {
  auto key = [&](const Value& v) {
    Value k = attr.empty() ? v : attribute_of(v, attr, getattr);
    if (!case_sensitive && k.is_string()) k = Value(lower(k.str()));
    return k;
  };
  bool failed = false;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? key(b).less(key(a), &failed) : key(a).less(key(b), &failed);
  });
  if (failed) type_error("'<' not supported between these values");
  return Value::list(std::move(items));
}

Value tojson(const Value& v, const Args& a) {
  const Value none = Value::none();
  const Value indent = arg(a, 0, "indent", none);
  const Value ascii = arg(a, 1000, "ensure_ascii", Value(false));
  const Value sort_keys = arg(a, 1000, "sort_keys", Value(false));
  const Value separators = arg(a, 1000, "separators", none);
  const int n = indent.is_none() || indent.is_undefined() ? -1 : static_cast<int>(indent.as_int());
  std::string item_sep = n >= 0 ? "," : ", ", key_sep = ": ";
  if (separators.is_sequence() && separators.items().size() == 2) {
    item_sep = separators.items()[0].to_str();
    key_sep = separators.items()[1].to_str();
  }
  if (v.is_undefined()) type_error("Object of type Undefined is not JSON serializable");
  return Value(to_json(v, n, ascii.truthy(), sort_keys.truthy(), item_sep, key_sep));
}

std::string indent(const std::string& s, const Value& width, bool first, bool blank) {
  const std::string pad = width.is_string() ? width.str() : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  std::string out;
  size_t at = 0;
  bool line_one = true;
  for (;;) {
    const size_t nl = s.find('\n', at);
    const std::string line = s.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    const bool indent_it = line_one ? first : (blank || !line.empty());
    if (indent_it && !(line_one && line.empty() && !blank && s.empty())) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    at = nl + 1;
    line_one = false;
  }
  return out;
}

}  // namespace

bool has_filter(const std::string& n) {
  static const std::set<std::string> kFilters = {
      "abs",    "attr",   "batch",  "capitalize", "center", "count",  "d",       "default", "dictsort", "e",
      "escape", "first",  "float",  "format",     "indent", "int",    "items",   "join",    "last",     "length",
      "list",   "lower",  "map",    "max",        "min",    "reject", "rejectattr", "replace", "reverse", "round",
      "safe",   "select", "selectattr", "sort",   "string", "sum",    "title",   "tojson",  "trim",     "truncate",
      "unique", "upper",  "wordcount"};
  return kFilters.count(n) > 0;
}

std::string percent_format(const std::string& f, const List& values) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%' || i + 1 >= f.size()) {
      out += f[i];
      continue;
    }
    const char c = f[++i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) type_error("not enough arguments for format string");
    const Value& v = values[next++];
    if (c == 's') {
      out += v.to_str();
    } else if (c == 'r') {
      out += v.repr();
    } else if (c == 'd' || c == 'i') {
      if (!v.is_number()) type_error("%d format: a number is required, not " + v.type_name());
      out += std::to_string(v.as_int());
    } else {
      type_error(std::string("unsupported format character '") + c + "'");
    }
  }
  return out;
}

Value apply_filter(const std::string& n, const Value& v, const Args& a, const GetAttr& getattr) {
  const Value none = Value::none();
  if (n == "default" || n == "d") {
    const Value dflt = arg(a, 0, "default_value", Value(""));
    const bool boolean = arg(a, 1, "boolean", Value(false)).truthy();
    return v.is_undefined() || (boolean && !v.truthy()) ? dflt : v;
  }
  if (n == "tojson") return tojson(v, a);
  if (v.is_undefined() && n != "length" && n != "count" && n != "list" && n != "string" && n != "join" && n != "safe" &&
      n != "trim" && n != "items" && n != "map" && n != "select" && n != "selectattr" && n != "reject" &&
      n != "rejectattr" && n != "lower" && n != "upper" && n != "first" && n != "last" && n != "unique" && n != "e" &&
      n != "escape" && n != "indent") {
    throw TemplateError{v.hint().empty() ? "'undefined' is undefined" : v.hint()};
  }
  if (n == "length" || n == "count") return Value(length_of(v));
  if (n == "string") return Value(v.to_str());
  if (n == "safe") return v.is_undefined() ? Value("") : v;
  if (n == "e" || n == "escape") {
    std::string out;
    for (char c : v.to_str()) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return Value(std::move(out));
  }
  if (n == "trim") return Value(strip(v.to_str(), arg(a, 0, "chars", none), true, true));
  if (n == "lower") return Value(lower(v.to_str()));
  if (n == "upper") return Value(upper(v.to_str()));
  if (n == "title") return Value(title(v.to_str()));
  if (n == "capitalize") {
    std::string s = lower(v.to_str());
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    return Value(s);
  }
  if (n == "center") {
    const std::string s = v.to_str();
    const int64_t w = arg(a, 0, "width", Value(80)).as_int(), len = length_of(Value(s));
    if (len >= w) return Value(s);
    const int64_t left = (w - len) / 2;
    return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(w - len - left), ' '));
  }
  if (n == "replace") {
    return Value(replace(v.to_str(), arg(a, 0, "old", Value("")).to_str(), arg(a, 1, "new", Value("")).to_str(),
                         arg(a, 2, "count", Value(-1)).is_none() ? -1 : arg(a, 2, "count", Value(-1)).as_int()));
  }
  if (n == "indent") {
    return Value(indent(v.to_str(), arg(a, 0, "width", Value(4)), arg(a, 1, "first", Value(false)).truthy(),
                        arg(a, 2, "blank", Value(false)).truthy()));
  }
  if (n == "truncate") {
    const std::string s = v.to_str();
    const auto chars = unicode::split_chars(s);
    const int64_t len = arg(a, 0, "length", Value(255)).as_int(), leeway = arg(a, 3, "leeway", Value(5)).as_int();
    const std::string end = arg(a, 2, "end", Value("...")).to_str();
    if (static_cast<int64_t>(chars.size()) <= len + leeway) return Value(s);
    std::string out;
    for (int64_t i = 0; i < len - static_cast<int64_t>(end.size()) && i < static_cast<int64_t>(chars.size()); ++i) out += chars[static_cast<size_t>(i)];
    if (!arg(a, 1, "killwords", Value(false)).truthy()) {
      const size_t sp = out.rfind(' ');
      if (sp != std::string::npos) out.resize(sp);
    }
    return Value(out + end);
  }
  if (n == "wordcount") return Value(static_cast<int64_t>(split(v.to_str(), none, -1).size()));
  if (n == "format") return Value(percent_format(v.to_str(), a.positional));  // "%s and %d" | format(a, b)
  if (n == "int") {
    if (v.is_number()) return Value(v.as_int());
    try {
      return Value(static_cast<int64_t>(std::stoll(strip(v.to_str(), none, true, true))));
    } catch (...) {
      return arg(a, 0, "default", Value(0));
    }
  }
  if (n == "float") {
    if (v.is_number()) return Value(v.as_float());
    try {
      return Value(std::stod(strip(v.to_str(), none, true, true)));
    } catch (...) {
      return arg(a, 0, "default", Value(0.0));
    }
  }
  if (n == "abs") {
    if (!v.is_number()) type_error("bad operand type for abs(): '" + v.type_name() + "'");
    return v.kind() == Value::Kind::kFloat ? Value(std::fabs(v.as_float())) : Value(static_cast<int64_t>(std::llabs(v.as_int())));
  }
  if (n == "round") {
    const int64_t precision = arg(a, 0, "precision", Value(0)).as_int();
    const std::string method = arg(a, 1, "method", Value("common")).to_str();
    const double m = std::pow(10.0, static_cast<double>(precision)), x = v.as_float() * m;
    const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::round(x);
    return Value(r / m);
  }
  if (n == "attr") return getattr(v, arg(a, 0, "name", Value("")).to_str());
  if (n == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_mapping()) type_error("can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, x] : v.entries()) out.push_back(Value::tuple({k, x}));
    return Value::list(std::move(out));
  }
  if (n == "dictsort") {
    if (!v.is_mapping()) type_error("dictsort needs a mapping");
    const bool case_sensitive = arg(a, 0, "case_sensitive", Value(false)).truthy();
    const bool by_value = arg(a, 1, "by", Value("key")).to_str() == "value";
    const bool reverse = arg(a, 2, "reverse", Value(false)).truthy();
    List pairs;
    for (const auto& [k, x] : v.entries()) pairs.push_back(Value::tuple({k, x}));
    return sorted(std::move(pairs), reverse, case_sensitive, by_value ? "1" : "0", getattr);
  }
  // The rest take a sequence (Undefined: empty); the selecting ones take
  // nothing from a false value, as Jinja's `if value:` does.
  const bool selecting = n == "map" || n == "select" || n == "reject" || n == "selectattr" || n == "rejectattr";
  const List items = selecting && !v.truthy() ? List{} : v.iterate();
  if (n == "list") return Value::list(items);
  if (n == "first") return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  if (n == "last") return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  if (n == "reverse") {
    if (v.is_string()) {
      std::string s;
      for (auto it = items.rbegin(); it != items.rend(); ++it) s += it->str();
      return Value(std::move(s));
    }
    return Value::list(List(items.rbegin(), items.rend()));
  }
  if (n == "join") {
    const std::string sep = arg(a, 0, "d", Value("")).to_str();
    const Value attr = arg(a, 1, "attribute", none);
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += sep;
      out += (attr.is_none() ? items[i] : attribute_of(items[i], attr.to_str(), getattr)).to_str();
    }
    return Value(std::move(out));
  }
  if (n == "map") {
    List out;
    if (!v.truthy()) return Value::generator({});
    const Value* attr = a.get(1000, "attribute");
    if (attr != nullptr) {
      const Value* dflt = a.get(1000, "default");
      for (const Value& item : items) {
        Value x = attribute_of(item, attr->to_str(), getattr);
        out.push_back(x.is_undefined() && dflt != nullptr ? *dflt : x);
      }
    } else {
      if (a.positional.empty()) type_error("map needs a filter name or attribute=");
      Args rest;
      rest.positional.assign(a.positional.begin() + 1, a.positional.end());
      rest.keyword = a.keyword;
      const std::string f = a.positional[0].to_str();
      if (!has_filter(f)) type_error("no filter named '" + f + "'");
      for (const Value& item : items) out.push_back(apply_filter(f, item, rest, getattr));
    }
    return Value::generator(std::move(out));
  }
  if (n == "select") return Value::generator(select(v, a, false, true, getattr));
  if (n == "reject") return Value::generator(select(v, a, false, false, getattr));
  if (n == "selectattr") return Value::generator(select(v, a, true, true, getattr));
  if (n == "rejectattr") return Value::generator(select(v, a, true, false, getattr));
  if (n == "unique") {
    List out;
    const bool case_sensitive = arg(a, 0, "case_sensitive", Value(false)).truthy();
    const Value attr = arg(a, 1, "attribute", none);
    std::vector<Value> seen;
    for (const Value& item : items) {
      Value key = attr.is_none() ? item : attribute_of(item, attr.to_str(), getattr);
      if (!case_sensitive && key.is_string()) key = Value(lower(key.str()));
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(key); })) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value::generator(std::move(out));
  }
  if (n == "sort") {
    const Value attr = arg(a, 2, "attribute", none);
    return sorted(items, arg(a, 0, "reverse", Value(false)).truthy(), arg(a, 1, "case_sensitive", Value(false)).truthy(),
                  attr.is_none() ? std::string() : attr.to_str(), getattr);
  }
  if (n == "sum") {
    Value total = arg(a, 1, "start", Value(0));
    const Value attr = arg(a, 0, "attribute", none);
    for (const Value& item : items) {
      const Value x = attr.is_none() ? item : attribute_of(item, attr.to_str(), getattr);
      if (!x.is_number() || !total.is_number()) type_error("unsupported operand type(s) for +");
      total = total.kind() == Value::Kind::kFloat || x.kind() == Value::Kind::kFloat ? Value(total.as_float() + x.as_float())
                                                                                      : Value(total.as_int() + x.as_int());
    }
    return total;
  }
  if (n == "min" || n == "max") {
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    Value best = items[0];
    bool failed = false;
    for (const Value& x : items) {
      if (n == "min" ? x.less(best, &failed) : best.less(x, &failed)) best = x;
    }
    if (failed) type_error("'<' not supported between these values");
    return best;
  }
  if (n == "batch") {
    const int64_t size = arg(a, 0, "linecount", Value(1)).as_int();
    if (size < 1) type_error("batch size must be positive");
    List out, cur;
    for (const Value& x : items) {
      cur.push_back(x);
      if (static_cast<int64_t>(cur.size()) == size) {
        out.push_back(Value::list(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      const Value* fill = a.get(1, "fill_with");
      while (fill != nullptr && !fill->is_none() && static_cast<int64_t>(cur.size()) < size) cur.push_back(*fill);
      out.push_back(Value::list(std::move(cur)));
    }
    return Value::list(std::move(out));
  }
  type_error("filter '" + n + "' is not supported");
}

bool has_test(const std::string& n) {
  static const std::set<std::string> kTests = {
      "boolean", "callable", "defined", "divisibleby", "eq",  "equalto", "==",       "escaped", "even",    "false",
      "filter",  "float",    "ge",      ">=",          "gt",  ">",       "greaterthan", "in",   "integer", "iterable",
      "le",      "<=",       "lower",   "lt",          "<",   "lessthan", "mapping", "ne",     "!=",      "none",
      "number",  "odd",      "sameas",  "sequence",    "string", "test", "true",     "undefined", "upper"};
  return kTests.count(n) > 0;
}

bool apply_test(const std::string& n, const Value& v, const Args& a) {
  const Value none = Value::none();
  const Value other = arg(a, 0, "value", none);
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.is_none();
  if (n == "boolean") return v.kind() == Value::Kind::kBool;
  if (n == "true") return v.kind() == Value::Kind::kBool && v.as_bool();
  if (n == "false") return v.kind() == Value::Kind::kBool && !v.as_bool();
  if (n == "integer") return v.kind() == Value::Kind::kInt;
  if (n == "float") return v.kind() == Value::Kind::kFloat;
  if (n == "number") return v.is_number();
  if (n == "string") return v.is_string();
  if (n == "mapping") return v.is_mapping();
  if (n == "sequence") return v.is_string() || v.is_sequence() || v.is_mapping();
  if (n == "iterable") return v.is_string() || v.is_sequence() || v.is_mapping();
  if (n == "callable") return v.is_callable();
  if (n == "escaped") return false;
  if (n == "lower") return v.is_string() && lower(v.str()) == v.str();
  if (n == "upper") return v.is_string() && upper(v.str()) == v.str();
  if (n == "even" || n == "odd") {
    if (!v.is_number()) type_error("'" + v.type_name() + "' is not a number");
    return (v.as_int() % 2 == 0) == (n == "even");
  }
  if (n == "divisibleby") {
    if (other.as_int() == 0) type_error("integer division or modulo by zero");
    return v.as_int() % other.as_int() == 0;
  }
  if (n == "eq" || n == "equalto" || n == "==") return v.equals(other);
  if (n == "ne" || n == "!=") return !v.equals(other);
  if (n == "sameas") return v.equals(other) && v.kind() == other.kind();
  if (n == "in") {
    if (other.is_string()) return v.is_string() && other.str().find(v.str()) != std::string::npos;
    if (other.is_mapping()) return other.contains_key(v);
    for (const Value& x : other.iterate()) {
      if (x.equals(v)) return true;
    }
    return false;
  }
  bool failed = false;
  if (n == "lt" || n == "<" || n == "lessthan") return v.less(other, &failed);
  if (n == "gt" || n == ">" || n == "greaterthan") return other.less(v, &failed);
  if (n == "le" || n == "<=") return !other.less(v, &failed);
  if (n == "ge" || n == ">=") return !v.less(other, &failed);
  if (n == "filter") return other.is_string() && has_filter(v.to_str());
  if (n == "test") return v.is_string() && has_test(v.str());
  type_error("test '" + n + "' is not supported");
}

Value method_of(const Value& self, const std::string& name) {
  const Value none = Value::none();
  auto bind = [&](Function f) { return Value::function(self.type_name() + "." + name, std::move(f)); };
  if (self.is_string()) {
    const std::string s = self.str();
    if (name == "startswith" || name == "endswith") {
      return bind([s, name](const Args& a) {
        if (a.positional.empty()) type_error(name + "() takes at least 1 argument (0 given)");
        return Value(starts_or_ends(s, a.positional[0], name == "startswith"));
      });
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      return bind([s, name](const Args& a) {
        const Value n = Value::none();
        return Value(strip(s, arg(a, 0, "chars", n), name != "rstrip", name != "lstrip"));
      });
    }
    if (name == "split" || name == "rsplit") {
      return bind([s, name](const Args& a) {
        const Value n = Value::none();
        const Value sep = arg(a, 0, "sep", n);
        const int64_t maxsplit = arg(a, 1, "maxsplit", Value(-1)).as_int();
        if (name == "split" || maxsplit < 0) return Value::list(split(s, sep, maxsplit));
        // rsplit with a limit: split the reversed pieces from the right.
        List all = split(s, sep, -1);
        if (static_cast<int64_t>(all.size()) <= maxsplit + 1) return Value::list(all);
        const std::string d = sep.is_none() ? " " : sep.to_str();
        const size_t keep = all.size() - static_cast<size_t>(maxsplit);
        std::string head;
        for (size_t i = 0; i < keep; ++i) head += (i ? d : "") + all[i].str();
        List out{Value(head)};
        out.insert(out.end(), all.begin() + static_cast<long>(keep), all.end());
        return Value::list(std::move(out));
      });
    }
    if (name == "replace") {
      return bind([s](const Args& a) {
        return Value(replace(s, arg(a, 0, "old", Value("")).to_str(), arg(a, 1, "new", Value("")).to_str(),
                             arg(a, 2, "count", Value(-1)).as_int()));
      });
    }
    if (name == "upper") return bind([s](const Args&) { return Value(upper(s)); });
    if (name == "lower") return bind([s](const Args&) { return Value(lower(s)); });
    if (name == "title") return bind([s](const Args&) { return Value(title(s)); });
    if (name == "capitalize") {
      return bind([s](const Args&) {
        std::string r = lower(s);
        if (!r.empty()) r[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(r[0])));
        return Value(r);
      });
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "count") {
      return bind([s, name](const Args& a) {
        const std::string sub = arg(a, 0, "sub", Value("")).to_str();
        if (name == "count") {
          if (sub.empty()) return Value(static_cast<int64_t>(unicode::split_chars(s).size()) + 1);
          int64_t c = 0;
          for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++c;
          return Value(c);
        }
        const size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
        if (at == std::string::npos) {
          if (name == "index") type_error("substring not found");
          return Value(-1);
        }
        return Value(static_cast<int64_t>(unicode::split_chars(s.substr(0, at)).size()));
      });
    }
    if (name == "join") {
      return bind([s](const Args& a) {
        if (a.positional.empty()) type_error("join() takes exactly one argument");
        std::string out;
        const List items = a.positional[0].iterate();
        for (size_t i = 0; i < items.size(); ++i) {
          if (!items[i].is_string()) type_error("sequence item " + std::to_string(i) + ": expected str instance, " + items[i].type_name() + " found");
          out += (i ? s : "") + items[i].str();
        }
        return Value(std::move(out));
      });
    }
    if (name == "splitlines") {
      return bind([s](const Args&) {
        List out;
        size_t at = 0;
        while (at < s.size()) {
          const size_t nl = s.find('\n', at);
          out.emplace_back(s.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
          if (nl == std::string::npos) break;
          at = nl + 1;
        }
        return Value::list(std::move(out));
      });
    }
    if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum" || name == "islower" ||
        name == "isupper") {
      return bind([s, name](const Args&) {
        if (s.empty()) return Value(false);
        bool all = true;
        for (char c : s) {
          const auto u = static_cast<unsigned char>(c);
          all = all && (name == "isdigit" ? std::isdigit(u) : name == "isalpha" ? std::isalpha(u)
                        : name == "isspace" ? std::isspace(u) : name == "isalnum" ? std::isalnum(u)
                        : name == "islower" ? !std::isupper(u) : !std::islower(u)) != 0;
        }
        return Value(all);
      });
    }
    return Value::undefined();
  }
  if (self.is_mapping()) {
    const Value d = self;
    if (name == "items") {
      return bind([d](const Args&) {
        List out;
        for (const auto& [k, v] : d.entries()) out.push_back(Value::tuple({k, v}));
        return Value::list(std::move(out));
      });
    }
    if (name == "keys" || name == "values") {
      return bind([d, name](const Args&) {
        List out;
        for (const auto& [k, v] : d.entries()) out.push_back(name == "keys" ? k : v);
        return Value::list(std::move(out));
      });
    }
    if (name == "get") {
      return bind([d](const Args& a) {
        if (a.positional.empty()) type_error("get expected at least 1 argument, got 0");
        if (d.contains_key(a.positional[0])) return d.get(a.positional[0]);
        return a.positional.size() > 1 ? a.positional[1] : Value::none();
      });
    }
    if (name == "copy") return bind([d](const Args&) { return d; });
    for (const char* unsafe : {"pop", "popitem", "update", "clear", "setdefault"}) {
      if (name == unsafe) throw TemplateError{"access to attribute '" + name + "' of 'dict' object is unsafe."};
    }
    return Value::undefined();
  }
  if (self.is_sequence()) {
    const Value l = self;
    if (name == "index" || name == "count") {
      return bind([l, name](const Args& a) {
        if (a.positional.empty()) type_error(name + "() takes exactly one argument");
        int64_t c = 0;
        for (size_t i = 0; i < l.items().size(); ++i) {
          if (l.items()[i].equals(a.positional[0])) {
            if (name == "index") return Value(static_cast<int64_t>(i));
            ++c;
          }
        }
        if (name == "index") type_error("x not in list");
        return Value(c);
      });
    }
    if (name == "copy" && self.kind() == Value::Kind::kList) return bind([l](const Args&) { return l; });
    for (const char* unsafe : {"append", "pop", "extend", "insert", "remove", "clear", "sort", "reverse"}) {
      if (name == unsafe) throw TemplateError{"access to attribute '" + name + "' of '" + self.type_name() + "' object is unsafe."};
    }
    return Value::undefined();
  }
  (void)none;
  return Value::undefined();
}

}  // namespace ork::jinja
