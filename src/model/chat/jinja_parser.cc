#include "model/chat/jinja_parser.h"

#include <cstdint>
#include <cstdlib>

#include "model/chat/jinja_lexer.h"

namespace ork::jinja {
namespace {

using K = Token::Kind;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body template_body() {
    Body body = statements({});
    if (peek().kind != K::kEnd) fail("unexpected '" + peek().text + "'");
    return body;
  }

 private:
  // ---- token helpers
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool at_op(const char* op) const { return peek().kind == K::kOp && peek().text == op; }
  bool at_name(const char* name) const { return peek().kind == K::kName && peek().text == name; }
  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError{"line " + std::to_string(peek().line) + ": " + what};
  }
  void expect_op(const char* op) {
    if (!at_op(op)) fail(std::string("expected '") + op + "', found '" + describe(peek()) + "'");
    next();
  }
  std::string expect_name() {
    if (peek().kind != K::kName) fail("expected a name, found '" + describe(peek()) + "'");
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != K::kBlockEnd) fail("expected the end of the tag, found '" + describe(peek()) + "'");
    next();
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case K::kBlockEnd: return "%}";
      case K::kVarEnd: return "}}";
      case K::kEnd: return "end of template";
      default: return t.text;
    }
  }

  // ---- statements
  // Statements up to a block tag whose keyword is one of `ends` (left unconsumed).
  Body statements(std::initializer_list<const char*> ends) {
    if (++depth_ > kMaxDepth) fail("blocks nested too deeply");
    struct Leave {
      int* d;
      ~Leave() { --*d; }
    } leave{&depth_};
    Body body;
    for (;;) {
      const Token& tok = peek();
      if (tok.kind == K::kEnd) {
        if (ends.size() > 0) fail(std::string("unexpected end of template: a block is not closed ({% ") + *(ends.end() - 1) + " %} expected)");
        return body;
      }
      if (tok.kind == K::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = tok.line;
        s->text = next().text;
        body.push_back(std::move(s));
        continue;
      }
      if (tok.kind == K::kVarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = tok.line;
        s->expr = expression();
        if (peek().kind != K::kVarEnd) fail("expected '}}', found '" + describe(peek()) + "'");
        next();
        body.push_back(std::move(s));
        continue;
      }
      if (tok.kind != K::kBlockBegin) fail("unexpected '" + describe(tok) + "'");
      const Token& kw = peek(1);
      for (const char* e : ends) {
        if (kw.kind == K::kName && kw.text == e) return body;
      }
      next();
      body.push_back(statement());
    }
  }

  StmtPtr statement() {
    const Token kw = next();
    if (kw.kind != K::kName) fail("expected a tag name");
    auto s = std::make_unique<Stmt>();
    s->line = kw.line;
    const std::string& k = kw.text;
    if (k == "if") {
      s->kind = Stmt::Kind::kIf;
      s->conditions.push_back(expression());
      expect_block_end();
      s->bodies.push_back(statements({"elif", "else", "endif"}));
      for (;;) {
        next();  // {%
        const std::string w = next().text;
        if (w == "elif") {
          s->conditions.push_back(expression());
          expect_block_end();
          s->bodies.push_back(statements({"elif", "else", "endif"}));
        } else if (w == "else") {
          expect_block_end();
          s->bodies.push_back(statements({"endif"}));
        } else {
          expect_block_end();
          break;
        }
      }
    } else if (k == "for") {
      s->kind = Stmt::Kind::kFor;
      s->targets = targets();
      if (!at_name("in")) fail("expected 'in' in a for loop");
      next();
      s->expr = expression(/*conditional=*/false);
      if (at_name("if")) {
        next();
        s->conditions.push_back(expression(/*conditional=*/false));
      }
      if (at_name("recursive")) fail("recursive for loops are not supported");
      expect_block_end();
      const int64_t loop_refs = loop_refs_;
      s->bodies.push_back(statements({"else", "endfor"}));
      s->uses_loop = loop_refs_ != loop_refs;
      next();
      if (next().text == "else") {
        expect_block_end();
        s->bodies.push_back(statements({"endfor"}));
        next();
        next();
      }
      expect_block_end();
    } else if (k == "set") {
      std::vector<std::string> names = targets(/*dotted=*/true);
      if (at_op("=")) {
        next();
        s->kind = Stmt::Kind::kSet;
        s->targets = std::move(names);
        s->expr = expression();
        expect_block_end();
      } else {
        s->kind = Stmt::Kind::kSetBlock;
        if (names.size() != 1) fail("a block set takes one name");
        s->targets = std::move(names);
        if (at_op("|")) fail("filters on a block set are not supported");
        expect_block_end();
        s->bodies.push_back(statements({"endset"}));
        next();
        next();
        expect_block_end();
      }
    } else if (k == "macro") {
      s->kind = Stmt::Kind::kMacro;
      s->name = expect_name();
      expect_op("(");
      while (!at_op(")")) {
        std::string p = expect_name();
        ExprPtr def;
        if (at_op("=")) {
          next();
          def = expression();
        }
        s->params.emplace_back(std::move(p), std::move(def));
        if (!at_op(",")) break;
        next();
      }
      expect_op(")");
      expect_block_end();
      s->bodies.push_back(statements({"endmacro"}));
      next();
      next();
      if (peek().kind == K::kName) next();  // {% endmacro name %}
      expect_block_end();
    } else if (k == "break" || k == "continue") {
      s->kind = k == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      expect_block_end();
    } else if (k == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      s->name = expect_name();
      if (at_op("(")) {
        next();
        while (!at_op(")")) {
          s->conditions.push_back(expression());
          if (!at_op(",")) break;
          next();
        }
        expect_op(")");
      }
      expect_block_end();
      s->bodies.push_back(statements({"endfilter"}));
      next();
      next();
      expect_block_end();
    } else if (k == "generation") {
      // transformers' assistant-mask tag: outside training it renders its body.
      s->kind = Stmt::Kind::kBlock;
      expect_block_end();
      s->bodies.push_back(statements({"endgeneration"}));
      next();
      next();
      expect_block_end();
    } else {
      fail("unknown or unsupported tag '" + k + "'");
    }
    return s;
  }

  // A name, or several separated by commas (with or without parentheses);
  // with `dotted`, one "ns.attr".
  std::vector<std::string> targets(bool dotted = false) {
    std::vector<std::string> out;
    const bool paren = at_op("(");
    if (paren) next();
    for (;;) {
      std::string n = expect_name();
      if (dotted && at_op(".")) {
        next();
        n += "." + expect_name();
      }
      out.push_back(std::move(n));
      if (!at_op(",")) break;
      next();
    }
    if (paren) expect_op(")");
    return out;
  }

  // ---- expressions, by Jinja2's precedence
  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  ExprPtr expression(bool conditional = true) {
    // Nesting is bounded so that no template can overflow the stack.
    if (++depth_ > kMaxDepth) fail("expressions nested too deeply");
    struct Leave {
      int* d;
      ~Leave() { --*d; }
    } leave{&depth_};
    ExprPtr e = or_expr();
    if (!conditional) return e;
    while (at_name("if")) {
      const int line = next().line;
      auto c = make(Expr::Kind::kCond, line);
      ExprPtr cond = or_expr();
      ExprPtr otherwise;
      if (at_name("else")) {
        next();
        otherwise = expression();
      }
      c->kids.push_back(std::move(cond));
      c->kids.push_back(std::move(e));
      c->kids.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (at_name("or")) {
      auto n = make(Expr::Kind::kOr, next().line);
      n->kids.push_back(std::move(e));
      n->kids.push_back(and_expr());
      e = std::move(n);
    }
    return e;
  }

  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (at_name("and")) {
      auto n = make(Expr::Kind::kAnd, next().line);
      n->kids.push_back(std::move(e));
      n->kids.push_back(not_expr());
      e = std::move(n);
    }
    return e;
  }

  ExprPtr not_expr() {
    if (at_name("not")) {
      if (++depth_ > kMaxDepth) fail("expressions nested too deeply");
      struct Leave {
        int* d;
        ~Leave() { --*d; }
      } leave{&depth_};
      auto n = make(Expr::Kind::kUnary, next().line);
      n->name = "not";
      n->kids.push_back(not_expr());
      return n;
    }
    return compare();
  }

  ExprPtr compare() {
    ExprPtr e = math1();
    for (;;) {
      std::string op;
      if (peek().kind == K::kOp && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                     peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = peek().text;
        next();
      } else if (at_name("in")) {
        next();
        op = "in";
      } else if (at_name("not") && peek(1).kind == K::kName && peek(1).text == "in") {
        next();
        next();
        op = "not in";
      } else {
        return e;
      }
      auto n = make(Expr::Kind::kBinary, e->line);
      n->name = op;
      n->kids.push_back(std::move(e));
      n->kids.push_back(math1());
      e = std::move(n);
    }
  }

  ExprPtr binary_chain(ExprPtr (Parser::*operand)(), std::initializer_list<const char*> ops) {
    ExprPtr e = (this->*operand)();
    for (;;) {
      const char* found = nullptr;
      for (const char* op : ops) {
        if (at_op(op)) found = op;
      }
      if (found == nullptr) return e;
      auto n = make(Expr::Kind::kBinary, next().line);
      n->name = found;
      n->kids.push_back(std::move(e));
      n->kids.push_back((this->*operand)());
      e = std::move(n);
    }
  }
  ExprPtr math1() { return binary_chain(&Parser::concat, {"+", "-"}); }
  ExprPtr concat() { return binary_chain(&Parser::math2, {"~"}); }
  ExprPtr math2() { return binary_chain(&Parser::power, {"*", "/", "//", "%"}); }
  ExprPtr power() { return binary_chain(&Parser::unary_filtered, {"**"}); }

  ExprPtr unary_filtered() { return unary(true); }

  ExprPtr unary(bool with_filter) {
    ExprPtr e;
    if (at_op("-") || at_op("+")) {
      if (++depth_ > kMaxDepth) fail("expressions nested too deeply");
      struct Leave {
        int* d;
        ~Leave() { --*d; }
      } leave{&depth_};
      auto n = make(Expr::Kind::kUnary, peek().line);
      n->name = next().text;
      n->kids.push_back(unary(false));
      e = std::move(n);
    } else {
      e = postfix(primary());
    }
    if (with_filter) e = filters(std::move(e));
    return e;
  }

  void call_args(Expr& e) {
    expect_op("(");
    while (!at_op(")")) {
      if (peek().kind == K::kName && peek(1).kind == K::kOp && peek(1).text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), expression());
      } else {
        if (!e.kwargs.empty()) fail("a positional argument after a keyword argument");
        e.kids.push_back(expression());
      }
      if (!at_op(",")) break;
      next();
    }
    expect_op(")");
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (at_op(".")) {
        const int line = next().line;
        auto n = make(Expr::Kind::kAttr, line);
        if (peek().kind == K::kInt) {
          // x.0 is x[0] in Jinja
          n->kind = Expr::Kind::kItem;
          n->kids.push_back(std::move(e));
          auto idx = make(Expr::Kind::kLiteral, line);
          idx->value = Value(static_cast<int64_t>(std::strtoll(next().text.c_str(), nullptr, 10)));
          n->kids.push_back(std::move(idx));
        } else {
          n->name = expect_name();
          n->kids.push_back(std::move(e));
        }
        e = std::move(n);
      } else if (at_op("[")) {
        const int line = next().line;
        ExprPtr parts[3];
        int colons = 0;
        for (;;) {
          if (at_op("]")) break;
          if (at_op(":")) {
            if (++colons > 2) fail("a slice takes at most two ':'");
            next();
            continue;
          }
          if (parts[colons]) fail("expected ':' or ']'");
          parts[colons] = expression();
        }
        expect_op("]");
        auto n = make(colons > 0 ? Expr::Kind::kSlice : Expr::Kind::kItem, line);
        n->kids.push_back(std::move(e));
        if (colons == 0) {
          if (!parts[0]) fail("an empty subscript");
          n->kids.push_back(std::move(parts[0]));
        } else {
          for (auto& p : parts) n->kids.push_back(std::move(p));
        }
        e = std::move(n);
      } else if (at_op("(")) {
        auto n = make(Expr::Kind::kCall, peek().line);
        n->kids.push_back(std::move(e));
        call_args(*n);
        e = std::move(n);
      } else {
        return e;
      }
    }
  }

  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (at_op("|")) {
        auto n = make(Expr::Kind::kFilter, next().line);
        n->name = expect_name();
        while (at_op(".")) {  // dotted filter names
          next();
          n->name += "." + expect_name();
        }
        n->kids.push_back(std::move(e));
        if (at_op("(")) call_args(*n);
        e = std::move(n);
      } else if (at_name("is")) {
        auto n = make(Expr::Kind::kTest, next().line);
        if (at_name("not")) {
          next();
          n->negated = true;
        }
        n->name = expect_name();
        n->kids.push_back(std::move(e));
        if (at_op("(")) {
          call_args(*n);
        } else if (test_argument_follows()) {
          // `x is divisibleby 3`: one argument without parentheses.
          n->kids.push_back(postfix(primary()));
        }
        e = std::move(n);
      } else {
        return e;
      }
    }
  }

  bool test_argument_follows() const {
    const Token& t = peek();
    if (t.kind == K::kString || t.kind == K::kInt || t.kind == K::kFloat) return true;
    if (t.kind == K::kOp) return t.text == "[" || t.text == "{";
    if (t.kind != K::kName) return false;
    for (const char* kw : {"and", "or", "not", "if", "else", "in", "is", "recursive"}) {
      if (t.text == kw) return false;
    }
    return true;
  }

  ExprPtr primary() {
    const Token& t = peek();
    auto lit = [&](Value v) {
      auto e = make(Expr::Kind::kLiteral, t.line);
      e->value = std::move(v);
      return e;
    };
    switch (t.kind) {
      case K::kString: {
        const int line = t.line;
        std::string s;
        while (peek().kind == K::kString) s += next().text;  // adjacent literals concatenate
        auto e = make(Expr::Kind::kLiteral, line);
        e->value = Value(std::move(s));
        return e;
      }
      case K::kInt: return lit(Value(static_cast<int64_t>(std::strtoll(next().text.c_str(), nullptr, 10))));
      case K::kFloat: return lit(Value(std::strtod(next().text.c_str(), nullptr)));
      case K::kName: {
        const std::string& n = t.text;
        if (n == "true" || n == "True") return next(), lit(Value(true));
        if (n == "false" || n == "False") return next(), lit(Value(false));
        if (n == "none" || n == "None") return next(), lit(Value::none());
        auto e = make(Expr::Kind::kName, t.line);
        e->name = next().text;
        if (e->name == "loop") ++loop_refs_;
        return e;
      }
      case K::kOp:
        if (t.text == "(") {
          const int line = next().line;
          if (at_op(")")) {
            next();
            return make(Expr::Kind::kTuple, line);
          }
          ExprPtr first = expression();
          if (!at_op(",")) {
            expect_op(")");
            return first;
          }
          auto tup = make(Expr::Kind::kTuple, line);
          tup->kids.push_back(std::move(first));
          while (at_op(",")) {
            next();
            if (at_op(")")) break;
            tup->kids.push_back(expression());
          }
          expect_op(")");
          return tup;
        }
        if (t.text == "[") {
          auto l = make(Expr::Kind::kList, next().line);
          while (!at_op("]")) {
            l->kids.push_back(expression());
            if (!at_op(",")) break;
            next();
          }
          expect_op("]");
          return l;
        }
        if (t.text == "{") {
          auto d = make(Expr::Kind::kDict, next().line);
          while (!at_op("}")) {
            d->kids.push_back(expression());
            expect_op(":");
            d->kids.push_back(expression());
            if (!at_op(",")) break;
            next();
          }
          expect_op("}");
          return d;
        }
        break;
      default: break;
    }
    fail("unexpected '" + describe(t) + "' in an expression");
  }

  static constexpr int kMaxDepth = 200;
  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int64_t loop_refs_ = 0;  // names `loop` parsed so far: a for body without one needs no loop object
};

}  // namespace

Body parse(std::string_view source) { return Parser(lex(source)).template_body(); }

}  // namespace ork::jinja
