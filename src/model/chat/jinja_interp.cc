#include "model/chat/jinja_interp.h"

#include <cmath>
#include <ctime>

#include "model/tokenizer/unicode.h"

namespace ork::jinja {
namespace {

struct BreakLoop {};
struct ContinueLoop {};

[[noreturn]] void type_error(const std::string& what) { throw TemplateError{what}; }

class Interpreter {
 public:
  Interpreter(const std::map<std::string, Value>& vars, const RenderOptions& o) : options_(o) {
    frames_.emplace_back();
    for (const auto& [k, v] : vars) frames_.back()[k] = v;
    install_globals();
  }
  // A namespace is the one mutable value, so the one way to a reference
  // cycle ({% set ns.me = ns %}, or ns inside a dict a bound method holds):
  // shared ownership alone would leak it. Nothing a render makes outlives
  // it (the output is text), so every namespace made here is emptied at
  // the end, which breaks any cycle through it.
  ~Interpreter() {
    for (const auto& weak : namespaces_) {
      if (const auto ns = weak.lock()) Dict().swap(ns->attrs);
    }
  }
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  std::string run(const Body& body) {
    std::string out;
    exec(body, out);
    return out;
  }

  int line() const { return line_; }

 private:
  using Frame = std::map<std::string, Value>;

  // ---- variables
  Value lookup(const std::string& name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      if (const auto f = it->find(name); f != it->end()) return f->second;
    }
    if (const auto g = globals_.find(name); g != globals_.end()) return g->second;
    return Value::undefined("'" + name + "' is undefined");
  }
  void assign(const std::string& name, Value v) { frames_.back()[name] = std::move(v); }

  Value make_namespace(Dict attrs) {
    Value v = Value::ns(std::move(attrs));
    namespaces_.push_back(v.namespace_weak());
    return v;
  }

  void install_globals() {
    globals_["raise_exception"] = Value::function("raise_exception", [](const Args& a) -> Value {
      const Value* m = a.get(0, "message");
      throw TemplateError{m != nullptr ? m->to_str() : std::string(), true};
    });
    globals_["namespace"] = Value::function("namespace", [this](const Args& a) {
      Dict attrs;
      for (const Value& p : a.positional) {
        if (p.is_mapping()) attrs.insert(attrs.end(), p.entries().begin(), p.entries().end());
      }
      for (const auto& [k, v] : a.keyword) attrs.emplace_back(Value(k), v);
      return make_namespace(std::move(attrs));
    });
    globals_["dict"] = Value::function("dict", [](const Args& a) {
      Dict d;
      for (const Value& p : a.positional) {
        if (p.is_mapping()) d.insert(d.end(), p.entries().begin(), p.entries().end());
      }
      for (const auto& [k, v] : a.keyword) d.emplace_back(Value(k), v);
      return Value::dict(std::move(d));
    });
    globals_["range"] = Value::function("range", [](const Args& a) {
      int64_t start = 0, stop = 0, step = 1;
      for (const Value& v : a.positional) {
        if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) {
          type_error("'" + v.type_name() + "' object cannot be interpreted as an integer");
        }
      }
      if (a.positional.size() == 1) {
        stop = a.positional[0].as_int();
      } else if (a.positional.size() >= 2) {
        start = a.positional[0].as_int();
        stop = a.positional[1].as_int();
        if (a.positional.size() > 2) step = a.positional[2].as_int();
      }
      if (step == 0) type_error("range() arg 3 must not be zero");
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        out.emplace_back(i);
        if (out.size() > 100000) type_error("range too big");
      }
      return Value::list(std::move(out));
    });
    globals_["strftime_now"] = Value::function("strftime_now", [this](const Args& a) {
      const Value* f = a.get(0, "format");
      std::tm t{};
      if (options_.now) {
        t = *options_.now;
      } else {
        const std::time_t now = std::time(nullptr);
        localtime_r(&now, &t);
      }
      char buf[256];
      const size_t n = std::strftime(buf, sizeof buf, f != nullptr ? f->to_str().c_str() : "", &t);
      return Value(std::string(buf, n));
    });
  }

  // ---- statements
  void exec(const Body& body, std::string& out) {
    for (const StmtPtr& s : body) exec(*s, out);
  }

  void step() {
    if (++steps_ > options_.max_steps) throw TemplateError{"the template ran past its step limit (a loop too long?)"};
  }

  void exec(const Stmt& s, std::string& out) {
    line_ = s.line;
    step();
    if (out.size() > options_.max_output) throw TemplateError{"the template's output passed its size limit"};
    switch (s.kind) {
      case Stmt::Kind::kText: out += s.text; return;
      case Stmt::Kind::kOutput: {
        const Value v = eval(*s.expr);
        line_ = s.line;
        out += v.to_str();
        return;
      }
      case Stmt::Kind::kIf:
        for (size_t i = 0; i < s.conditions.size(); ++i) {
          if (eval(*s.conditions[i]).truthy()) {
            exec(s.bodies[i], out);
            return;
          }
        }
        if (s.bodies.size() > s.conditions.size()) exec(s.bodies.back(), out);
        return;
      case Stmt::Kind::kFor: exec_for(s, out); return;
      case Stmt::Kind::kSet: {
        Value v = eval(*s.expr);
        set_targets(s, std::move(v));
        return;
      }
      case Stmt::Kind::kSetBlock: {
        std::string body;
        exec(s.bodies[0], body);
        set_targets(s, Value(std::move(body)));
        return;
      }
      case Stmt::Kind::kMacro: define_macro(s); return;
      case Stmt::Kind::kBreak: throw BreakLoop{};
      case Stmt::Kind::kContinue: throw ContinueLoop{};
      case Stmt::Kind::kFilterBlock: {
        std::string body;
        exec(s.bodies[0], body);
        Args args;
        for (const ExprPtr& e : s.conditions) args.positional.push_back(eval(*e));
        out += filter(s.name, Value(std::move(body)), args).to_str();
        return;
      }
      case Stmt::Kind::kBlock: exec(s.bodies[0], out); return;
    }
  }

  void set_targets(const Stmt& s, Value v) {
    if (s.targets.size() == 1) {
      const std::string& t = s.targets[0];
      const size_t dot = t.find('.');
      if (dot == std::string::npos) {
        assign(t, std::move(v));
        return;
      }
      const Value obj = lookup(t.substr(0, dot));
      if (obj.kind() != Value::Kind::kNamespace) {
        type_error("cannot assign attribute on non-namespace object");
      }
      Dict& attrs = obj.namespace_object().attrs;
      const Value key(t.substr(dot + 1));
      for (auto& kv : attrs) {
        if (kv.first.equals(key)) {
          kv.second = std::move(v);
          return;
        }
      }
      attrs.emplace_back(key, std::move(v));
      return;
    }
    const List items = v.iterate();
    if (items.size() != s.targets.size()) {
      type_error(items.size() < s.targets.size() ? "not enough values to unpack" : "too many values to unpack");
    }
    for (size_t i = 0; i < items.size(); ++i) assign(s.targets[i], items[i]);
  }

  void exec_for(const Stmt& s, std::string& out) {
    const Value seq = eval(*s.expr);
    line_ = s.line;
    List all;
    if (seq.is_none()) type_error("'NoneType' object is not iterable");
    if (seq.is_mapping()) {
      all = seq.iterate();  // a dict iterates its keys
    } else {
      all = seq.iterate();
    }
    // The inline filter runs before the loop: the counters count what passed.
    List items;
    if (!s.conditions.empty()) {
      for (const Value& v : all) {
        frames_.emplace_back();
        bind_targets(s.targets, v);
        const bool keep = eval(*s.conditions[0]).truthy();
        frames_.pop_back();
        if (keep) items.push_back(v);
      }
    } else {
      items = std::move(all);
    }
    if (items.empty()) {
      if (s.bodies.size() > 1) exec(s.bodies[1], out);
      return;
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      frames_.emplace_back();
      bind_targets(s.targets, items[static_cast<size_t>(i)]);
      if (s.uses_loop) assign("loop", loop_object(items, i));
      try {
        exec(s.bodies[0], out);
      } catch (const BreakLoop&) {
        frames_.pop_back();
        break;
      } catch (const ContinueLoop&) {
      }
      frames_.pop_back();
    }
  }

  void bind_targets(const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      assign(targets[0], v);
      return;
    }
    const List parts = v.iterate();
    if (parts.size() != targets.size()) {
      type_error(parts.size() < targets.size() ? "not enough values to unpack (expected " + std::to_string(targets.size()) + ")"
                                               : "too many values to unpack (expected " + std::to_string(targets.size()) + ")");
    }
    for (size_t i = 0; i < parts.size(); ++i) assign(targets[i], parts[i]);
  }

  Value loop_object(const List& items, int64_t i) {
    const auto n = static_cast<int64_t>(items.size());
    Dict d;
    d.emplace_back(Value("index"), Value(i + 1));
    d.emplace_back(Value("index0"), Value(i));
    d.emplace_back(Value("revindex"), Value(n - i));
    d.emplace_back(Value("revindex0"), Value(n - i - 1));
    d.emplace_back(Value("first"), Value(i == 0));
    d.emplace_back(Value("last"), Value(i == n - 1));
    d.emplace_back(Value("length"), Value(n));
    d.emplace_back(Value("depth"), Value(1));
    d.emplace_back(Value("depth0"), Value(0));
    d.emplace_back(Value("previtem"), i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    d.emplace_back(Value("nextitem"), i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    d.emplace_back(Value("cycle"), Value::function("cycle", [i](const Args& a) {
                     if (a.positional.empty()) type_error("no items for cycling given");
                     return a.positional[static_cast<size_t>(i) % a.positional.size()];
                   }));
    return make_namespace(std::move(d));
  }

  void define_macro(const Stmt& s) {
    const Stmt* m = &s;
    assign(s.name, Value::function(s.name, [this, m](const Args& a) {
      // A macro sees the template's top-level variables as they are when it
      // is called, and its own sets stay local.
      if (depth_ >= options_.max_depth) throw TemplateError{"macros nested too deeply (recursion without an end?)"};
      ++depth_;
      struct Depth {
        int* d;
        ~Depth() { --*d; }
      } depth_guard{&depth_};
      std::vector<Frame> saved;
      saved.swap(frames_);
      frames_.push_back(saved.front());
      frames_.emplace_back();
      struct Restore {
        Interpreter* self;
        std::vector<Frame>* saved;
        ~Restore() {
          // Namespaces are shared objects: changes to them live on; the
          // top-level frame itself is restored as it was.
          self->frames_.swap(*saved);
        }
      } restore{this, &saved};
      List varargs;
      for (size_t i = 0; i < m->params.size(); ++i) {
        const auto& [pname, def] = m->params[i];
        const Value* given = a.get(i, pname);
        assign(pname, given != nullptr ? *given : def ? eval(*def) : Value::undefined("'" + pname + "' is undefined"));
      }
      for (size_t i = m->params.size(); i < a.positional.size(); ++i) varargs.push_back(a.positional[i]);
      assign("varargs", Value::list(std::move(varargs)));
      Dict kwargs;
      for (const auto& [k, v] : a.keyword) {
        bool known = false;
        for (const auto& p : m->params) known = known || p.first == k;
        if (!known) kwargs.emplace_back(Value(k), v);
      }
      assign("kwargs", Value::dict(std::move(kwargs)));
      std::string out;
      exec(m->bodies[0], out);
      return Value(std::move(out));
    }));
  }

  // ---- expressions
  Value eval(const Expr& e) {
    line_ = e.line;
    step();
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: return lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List items;
        for (const ExprPtr& k : e.kids) items.push_back(eval(*k));
        return e.kind == Expr::Kind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
          Value k = eval(*e.kids[i]);
          Value v = eval(*e.kids[i + 1]);
          bool replaced = false;
          for (auto& kv : d) {
            if (kv.first.equals(k)) {
              kv.second = v;
              replaced = true;
            }
          }
          if (!replaced) d.emplace_back(std::move(k), std::move(v));
        }
        return Value::dict(std::move(d));
      }
      case Expr::Kind::kAttr: return getattr(eval(*e.kids[0]), e.name);
      case Expr::Kind::kItem: return getitem(eval(*e.kids[0]), eval(*e.kids[1]));
      case Expr::Kind::kSlice: return slice(e);
      case Expr::Kind::kCall: {
        const Value f = eval(*e.kids[0]);
        Args args = call_args(e, 1);
        line_ = e.line;
        if (f.is_undefined()) throw TemplateError{undefined_message(f)};
        if (!f.is_callable()) type_error("'" + f.type_name() + "' object is not callable");
        return f.call(args);
      }
      case Expr::Kind::kFilter: {
        const Value v = eval(*e.kids[0]);
        Args args = call_args(e, 1);
        line_ = e.line;
        return filter(e.name, v, args);
      }
      case Expr::Kind::kTest: {
        const Value v = eval(*e.kids[0]);
        Args args = call_args(e, 1);
        line_ = e.line;
        if (!has_test(e.name)) throw TemplateError{"no test named '" + e.name + "'"};
        return Value(apply_test(e.name, v, args) != e.negated);
      }
      case Expr::Kind::kUnary: {
        const Value v = eval(*e.kids[0]);
        if (e.name == "not") return Value(!v.truthy());
        if (v.is_undefined()) throw TemplateError{undefined_message(v)};
        if (!v.is_number()) type_error("bad operand type for unary " + e.name + ": '" + v.type_name() + "'");
        if (e.name == "+") return v.kind() == Value::Kind::kBool ? Value(v.as_int()) : v;
        return v.kind() == Value::Kind::kFloat ? Value(-v.as_float()) : Value(-v.as_int());
      }
      case Expr::Kind::kAnd: {
        Value a = eval(*e.kids[0]);
        return a.truthy() ? eval(*e.kids[1]) : a;
      }
      case Expr::Kind::kOr: {
        Value a = eval(*e.kids[0]);
        return a.truthy() ? a : eval(*e.kids[1]);
      }
      case Expr::Kind::kCond:
        if (eval(*e.kids[0]).truthy()) return eval(*e.kids[1]);
        return e.kids[2] ? eval(*e.kids[2]) : Value::undefined("the inline if had no else");
      case Expr::Kind::kBinary: return binary(e);
    }
    return Value();
  }

  Args call_args(const Expr& e, size_t first) {
    Args a;
    for (size_t i = first; i < e.kids.size(); ++i) a.positional.push_back(eval(*e.kids[i]));
    for (const auto& [k, v] : e.kwargs) a.keyword.emplace_back(k, eval(*v));
    return a;
  }

  static std::string undefined_message(const Value& v) {
    return v.hint().empty() ? "'undefined' is undefined" : v.hint();
  }

  Value filter(const std::string& name, const Value& v, const Args& args) {
    if (!has_filter(name)) throw TemplateError{"no filter named '" + name + "'"};
    return apply_filter(name, v, args, [this](const Value& x, const std::string& attr) { return getattr(x, attr); });
  }

  // x.name: an attribute (a method) first, then an item, as Python and
  // Jinja2 look them up.
  Value getattr(const Value& x, const std::string& name) {
    switch (x.kind()) {
      case Value::Kind::kUndefined: throw TemplateError{undefined_message(x)};
      case Value::Kind::kNamespace: {
        for (const auto& [k, v] : x.namespace_object().attrs) {
          if (k.is_string() && k.str() == name) return v;
        }
        return Value::undefined("'Namespace' object has no attribute '" + name + "'");
      }
      case Value::Kind::kDict: {
        Value m = method_of(x, name);
        if (!m.is_undefined()) return m;
        const Value item = x.get(Value(name));
        if (!item.is_undefined() || x.contains_key(Value(name))) return item;
        return Value::undefined("'dict object' has no attribute '" + name + "'");
      }
      default: {
        Value m = method_of(x, name);
        if (!m.is_undefined()) return m;
        return Value::undefined("'" + x.type_name() + " object' has no attribute '" + name + "'");
      }
    }
  }

  // x[key]: an item first, then an attribute.
  Value getitem(const Value& x, const Value& key) {
    switch (x.kind()) {
      case Value::Kind::kUndefined: throw TemplateError{undefined_message(x)};
      case Value::Kind::kDict: {
        if (x.contains_key(key)) return x.get(key);
        if (key.is_string()) {
          Value m = method_of(x, key.str());
          if (!m.is_undefined()) return m;
        }
        return Value::undefined("'dict object' has no attribute '" + key.to_str() + "'");
      }
      case Value::Kind::kNamespace:
        return key.is_string() ? getattr(x, key.str()) : Value::undefined("'Namespace' object is not subscriptable");
      case Value::Kind::kList:
      case Value::Kind::kTuple:
      case Value::Kind::kString: {
        if (key.is_string()) return getattr(x, key.str());
        if (key.kind() != Value::Kind::kInt && key.kind() != Value::Kind::kBool) {
          type_error(x.type_name() + " indices must be integers or slices, not " + key.type_name());
        }
        const List items = x.is_string() ? x.iterate() : x.items();
        int64_t i = key.as_int();
        const auto n = static_cast<int64_t>(items.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined(x.type_name() + " object has no element " + key.to_str());
        return items[static_cast<size_t>(i)];
      }
      default: return Value::undefined("'" + x.type_name() + "' object has no attribute '" + key.to_str() + "'");
    }
  }

  Value slice(const Expr& e) {
    const Value x = eval(*e.kids[0]);
    auto part = [&](size_t i, bool* given) -> int64_t {
      if (!e.kids[i]) {
        *given = false;
        return 0;
      }
      const Value v = eval(*e.kids[i]);
      *given = !v.is_none();
      if (*given && v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) {
        type_error("slice indices must be integers or None");
      }
      return *given ? v.as_int() : 0;
    };
    bool has_start, has_stop, has_step;
    int64_t start = part(1, &has_start), stop = part(2, &has_stop), step = part(3, &has_step);
    if (!has_step) step = 1;
    if (step == 0) type_error("slice step cannot be zero");
    if (x.is_undefined()) throw TemplateError{undefined_message(x)};
    if (!x.is_string() && !x.is_sequence()) type_error("'" + x.type_name() + "' object is not subscriptable");
    const List items = x.is_string() ? x.iterate() : x.items();
    const auto n = static_cast<int64_t>(items.size());
    // Python's slice.indices().
    auto clamp = [&](int64_t v, bool given, int64_t dflt) {
      if (!given) return dflt;
      if (v < 0) v += n;
      if (step > 0) return std::clamp<int64_t>(v, 0, n);
      return std::clamp<int64_t>(v, -1, n - 1);
    };
    start = clamp(start, has_start, step > 0 ? 0 : n - 1);
    stop = clamp(stop, has_stop, step > 0 ? n : -1);
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(items[static_cast<size_t>(i)]);
    if (x.is_string()) {
      std::string s;
      for (const Value& c : out) s += c.str();
      return Value(std::move(s));
    }
    return x.kind() == Value::Kind::kTuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    const Value a = eval(*e.kids[0]);
    const Value b = eval(*e.kids[1]);
    line_ = e.line;
    if (op == "==") return Value(a.equals(b));
    if (op == "!=") return Value(!a.equals(b));
    if (op == "in" || op == "not in") return Value(contains(b, a) != (op == "not in"));
    if (op == "~") return Value(a.to_str() + b.to_str());
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      bool failed = false;
      const bool lt = a.less(b, &failed), gt = b.less(a, &failed);
      if (failed) {
        type_error("'" + op + "' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
      }
      if (op == "<") return Value(lt);
      if (op == ">") return Value(gt);
      if (op == "<=") return Value(!gt);
      return Value(!lt);
    }
    if (a.is_undefined()) throw TemplateError{undefined_message(a)};
    if (b.is_undefined()) throw TemplateError{undefined_message(b)};
    if (op == "+") {
      if (a.is_number() && b.is_number()) return arithmetic('+', a, b);
      if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
      if (a.kind() == Value::Kind::kList && b.kind() == Value::Kind::kList) {
        List out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return Value::list(std::move(out));
      }
      if (a.kind() == Value::Kind::kTuple && b.kind() == Value::Kind::kTuple) {
        List out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return Value::tuple(std::move(out));
      }
      if (a.is_string() || a.kind() == Value::Kind::kList || a.kind() == Value::Kind::kTuple) {
        type_error("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
      }
      type_error("unsupported operand type(s) for +: '" + a.type_name() + "' and '" + b.type_name() + "'");
    }
    if (op == "*") {
      const Value* seq = a.is_string() || a.is_sequence() ? &a : b.is_string() || b.is_sequence() ? &b : nullptr;
      const Value* count = seq == &a ? &b : &a;
      if (seq != nullptr && (count->kind() == Value::Kind::kInt || count->kind() == Value::Kind::kBool)) {
        const int64_t times = std::max<int64_t>(0, count->as_int());
        if (times > 100000) type_error("repetition too large");
        if (seq->is_string()) {
          std::string out;
          for (int64_t i = 0; i < times; ++i) out += seq->str();
          return Value(std::move(out));
        }
        List out;
        for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq->items().begin(), seq->items().end());
        return seq->kind() == Value::Kind::kTuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
      }
    }
    if (op == "%" && a.is_string()) {
      return Value(percent_format(a.str(), b.kind() == Value::Kind::kTuple ? b.items() : List{b}));
    }
    if (a.is_number() && b.is_number() && op.size() <= 2) return arithmetic(op == "//" ? 'f' : op == "**" ? 'p' : op[0], a, b);
    type_error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  }

  static Value arithmetic(char op, const Value& a, const Value& b) {
    const bool floats = a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat;
    if ((op == '/' || op == 'f' || op == '%') && b.as_float() == 0.0) {
      type_error(op == '/' ? "division by zero" : floats ? "float modulo" : "integer division or modulo by zero");
    }
    if (op == '/') return Value(a.as_float() / b.as_float());
    if (op == 'p') {
      if (!floats && b.as_int() >= 0) {
        int64_t r = 1;
        for (int64_t i = 0; i < b.as_int() && i < 64; ++i) r *= a.as_int();
        return Value(r);
      }
      return Value(std::pow(a.as_float(), b.as_float()));
    }
    if (floats) {
      const double x = a.as_float(), y = b.as_float();
      switch (op) {
        case '+': return Value(x + y);
        case '-': return Value(x - y);
        case '*': return Value(x * y);
        case 'f': return Value(std::floor(x / y));
        case '%': {
          const double m = std::fmod(x, y);
          return Value(m != 0 && ((m < 0) != (y < 0)) ? m + y : m);
        }
      }
    }
    const int64_t x = a.as_int(), y = b.as_int();
    switch (op) {
      case '+': return Value(x + y);
      case '-': return Value(x - y);
      case '*': return Value(x * y);
      case 'f': return Value(x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0));
      case '%': {
        const int64_t m = x % y;
        return Value(m != 0 && ((m < 0) != (y < 0)) ? m + y : m);
      }
    }
    return Value();
  }

  static bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
      case Value::Kind::kUndefined: return false;
      case Value::Kind::kString:
        if (!item.is_string()) type_error("'in <string>' requires string as left operand, not " + item.type_name());
        return container.str().find(item.str()) != std::string::npos;
      case Value::Kind::kDict: return container.contains_key(item);
      case Value::Kind::kList:
      case Value::Kind::kTuple:
      case Value::Kind::kGenerator:
        for (const Value& v : container.items()) {
          if (v.equals(item)) return true;
        }
        return false;
      case Value::Kind::kNamespace:
        for (const auto& kv : container.namespace_object().attrs) {
          if (kv.first.equals(item)) return true;
        }
        return false;
      default: type_error("argument of type '" + container.type_name() + "' is not iterable");
    }
  }

  const RenderOptions& options_;
  std::vector<Frame> frames_;
  std::map<std::string, Value> globals_;
  int line_ = 0;
  int64_t steps_ = 0;
  int depth_ = 0;
  std::vector<std::weak_ptr<Namespace>> namespaces_;
};

}  // namespace

std::string render(const Body& program, const std::map<std::string, Value>& variables, const RenderOptions& options) {
  Interpreter interp(variables, options);
  try {
    return interp.run(program);
  } catch (TemplateError& e) {
    if (!e.raised && e.message.rfind("line ", 0) != 0) e.message = "line " + std::to_string(interp.line()) + ": " + e.message;
    throw;
  } catch (const BreakLoop&) {
    throw TemplateError{"line " + std::to_string(interp.line()) + ": 'break' outside a loop"};
  } catch (const ContinueLoop&) {
    throw TemplateError{"line " + std::to_string(interp.line()) + ": 'continue' outside a loop"};
  }
}

}  // namespace ork::jinja
