#include "model/chat/chat_template.h"

#include "model/chat/jinja_interp.h"
#include "model/chat/jinja_parser.h"

namespace ork {
namespace {

jinja::Value from_json(const nlohmann::ordered_json& j, int depth = 0) {
  using jinja::Value;
  if (depth > 128) throw jinja::TemplateError{"the conversation is nested more than 128 levels deep"};
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      jinja::List items;
      for (const auto& x : j) items.push_back(from_json(x, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      jinja::Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.emplace_back(Value(it.key()), from_json(it.value(), depth + 1));
      return Value::dict(std::move(d));
    }
    default: return Value::undefined();
  }
}

const char* kChatML =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}";

}  // namespace

ChatTemplate::ChatTemplate() = default;
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

Result<ChatTemplate> ChatTemplate::parse(const std::string& source, const std::string& name) {
  ChatTemplate t;
  t.name_ = name;
  t.source_ = source;
  try {
    t.program_ = std::make_shared<const jinja::Body>(jinja::parse(source));
  } catch (const jinja::TemplateError& e) {
    return error(StatusCode::kUnsupported, "chat template {}: {}", name, e.message);
  }
  return t;
}

ChatTemplate ChatTemplate::chatml() { return std::move(parse(kChatML, "chatml (built-in)").value()); }

Result<std::string> ChatTemplate::render(const Inputs& in) const {
  if (!program_) return error(StatusCode::kInternal, "chat template {}: not parsed", name_);
  jinja::RenderOptions o;
  o.now = in.now;
  try {
    std::map<std::string, jinja::Value> vars;
    vars["messages"] = from_json(in.messages);
    vars["tools"] = in.tools.is_null() ? jinja::Value::none() : from_json(in.tools);
    vars["documents"] = jinja::Value::none();
    vars["add_generation_prompt"] = jinja::Value(in.add_generation_prompt);
    if (in.vars.is_object()) {
      for (auto it = in.vars.begin(); it != in.vars.end(); ++it) vars[it.key()] = from_json(it.value());
    }
    return jinja::render(*program_, vars, o);
  } catch (const jinja::TemplateError& e) {
    if (e.raised) return error(StatusCode::kInvalidArgument, "{}", e.message);
    return error(StatusCode::kInvalidArgument, "chat template {}: {}", name_, e.message);
  }
}

}  // namespace ork
