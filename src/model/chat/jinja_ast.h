// The parsed form of a chat template: statements and expressions, each with
// the source line it came from (errors name it).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/chat/jinja_value.h"

namespace ork::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kList,     // kids
    kTuple,    // kids
    kDict,     // kids: key, value, key, value, ...
    kAttr,     // kids[0].name
    kItem,     // kids[0][kids[1]]
    kSlice,    // kids[0][kids[1]:kids[2]:kids[3]] (null kids: omitted)
    kCall,     // kids[0](kids[1..], kwargs)
    kFilter,   // kids[0] | name(kids[1..], kwargs)
    kTest,     // kids[0] is [not] name(kids[1..])
    kUnary,    // op kids[0]: "-", "+", "not"
    kBinary,   // kids[0] op kids[1]: + - * / // % ** ~ == != < > <= >= in "not in"
    kAnd,      // kids[0] and kids[1]
    kOr,       // kids[0] or kids[1]
    kCond,     // kids[1] if kids[0] else kids[2] (kids[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;  // name, attribute, filter, test or operator
  bool negated = false;
  std::vector<ExprPtr> kids;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,        // text
    kOutput,      // {{ expr }}
    kIf,          // conditions[i] -> bodies[i]; an else body when bodies has one more
    kFor,         // for targets in expr [if cond]: bodies[0], else bodies[1]
    kSet,         // set targets = expr (targets: names, or one "ns.attr")
    kSetBlock,    // set target: bodies[0] rendered
    kMacro,       // macro name(params = defaults): bodies[0]
    kBreak,
    kContinue,
    kFilterBlock, // filter name(args): bodies[0]
    kBlock,       // a body rendered as it is ({% generation %}, {% with %})
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;
  std::vector<std::string> targets;
  std::vector<ExprPtr> conditions;  // if/elif; for: the filter; filter block: args
  ExprPtr expr;
  std::vector<Body> bodies;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters and defaults (null: none)
  bool uses_loop = false;  // for: the body names `loop` (lexically; macros do not see a caller's loop)
};

}  // namespace ork::jinja
