// Parses a chat template's tokens into statements (jinja_ast.h), with
// Jinja2's grammar and operator precedence. Throws TemplateError naming the
// line on what it cannot parse - an unknown tag, an unclosed block, a
// construct this renderer does not support.
#pragma once

#include <string_view>

#include "model/chat/jinja_ast.h"

namespace ork::jinja {

Body parse(std::string_view source);

}  // namespace ork::jinja
