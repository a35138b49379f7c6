// Fuzz target for chat templates (a model's tokenizer.chat_template is
// untrusted input): any bytes parse or fail with a message naming a line,
// and whatever parses renders or fails - within the renderer's step,
// output and depth limits, never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "model/chat/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ork;
  const std::string source(reinterpret_cast<const char*>(data), size);
  auto t = ChatTemplate::parse(source, "fuzz");
  if (!t.is_ok()) {
    if (t.status().message().find("chat template fuzz: ") != 0) std::abort();
    return 0;
  }
  static const auto kConversation = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi \u00e9 \ud83d\ude00"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
    {"role": "tool", "content": "{\"ok\": true}"}])");
  ChatTemplate::Inputs in;
  in.messages = kConversation;
  in.vars = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  (void)t->render(in);
  return 0;
}
