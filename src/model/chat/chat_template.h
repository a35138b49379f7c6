// A model's chat template (GGUF `tokenizer.chat_template`, Jinja2) rendered
// the way transformers' apply_chat_template renders it - byte for byte on
// the real templates in ../shared/testdata/templates - or, for a model
// without one, ChatML (as llama-server falls back).
//
// Thread-safe after parse: render() is const.
#pragma once

#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ork/status.h"

namespace ork {

namespace jinja {
struct Stmt;
}

class ChatTemplate {
 public:
  // Parses a template; errors name `name` and the line.
  static Result<ChatTemplate> parse(const std::string& source, const std::string& name);
  // The ChatML fallback: <|im_start|>role\ncontent<|im_end|>\n per message.
  static ChatTemplate chatml();
  ChatTemplate();
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  struct Inputs {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // OpenAI-style
    nlohmann::ordered_json tools;     // null: none (passed as None, as transformers does)
    bool add_generation_prompt = true;
    // bos_token, eos_token, enable_thinking, ...: any other variables.
    nlohmann::ordered_json vars = nlohmann::ordered_json::object();
    std::optional<std::tm> now;       // strftime_now()'s time (unset: now)
  };
  // The prompt text. An error names the template and line; one raised by
  // the template itself (raise_exception) carries its own message.
  Result<std::string> render(const Inputs& in) const;

  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }

 private:
  std::string name_, source_;
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Stmt>>> program_;
};

}  // namespace ork
