// ork template: render a chat template for a conversation - the debugging
// aid for a template that misbehaves. The template is a .jinja file or a
// model (GGUF or orkpack) whose tokenizer.chat_template is read; the
// conversation and variables are JSON in the layout of
// ../shared/testdata/templates (messages, add_generation_prompt, tools).
#include <cstdio>
#include <ctime>
#include <fstream>

#include "commands.h"
#include "core/escape.h"
#include "format/gguf/gguf.h"
#include "format/orkpack/orkpack.h"
#include "model/chat/chat_template.h"

namespace ork::cli {
namespace {

struct TemplateOptions {
  std::string source, conversation, vars, date;
  bool no_generation_prompt = false;
};

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(StatusCode::kIo, "{}: cannot read", path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Result<nlohmann::ordered_json> read_json(const std::string& path) {
  ORK_ASSIGN_OR_RETURN(std::string text, read_text(path));
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error(StatusCode::kInvalidArgument, "{}: not valid JSON", path);
  return j;
}

// A model's template, or the file itself.
Result<std::string> template_source(const std::string& path) {
  if (OrkpackFile::sniff_file(path)) {
    ORK_ASSIGN_OR_RETURN(OrkpackFile pack, OrkpackFile::open(path));
    if (auto t = pack.metadata().find_string("tokenizer.chat_template")) return *t;
    return error(StatusCode::kNotFound, "{}: the model has no tokenizer.chat_template", path);
  }
  char magic[4] = {};
  std::ifstream(path, std::ios::binary).read(magic, 4);
  if (std::string_view(magic, 4) == "GGUF") {
    ORK_ASSIGN_OR_RETURN(GgufFile g, GgufFile::open(path));
    if (auto t = g.find_string("tokenizer.chat_template")) return *t;
    return error(StatusCode::kNotFound, "{}: the model has no tokenizer.chat_template", path);
  }
  return read_text(path);
}

int run_template(const TemplateOptions& o) {
  auto source = template_source(o.source);
  if (!source.is_ok()) return fail(source.status().to_string());
  auto tmpl = ChatTemplate::parse(*source, o.source);
  if (!tmpl.is_ok()) return fail(tmpl.status().to_string());
  auto conv = read_json(o.conversation);
  if (!conv.is_ok()) return fail(conv.status().to_string());
  ChatTemplate::Inputs in;
  if (conv->is_array()) {
    in.messages = *conv;
  } else if (conv->is_object() && conv->contains("messages")) {
    in.messages = (*conv)["messages"];
    if (!in.messages.is_array()) return fail(o.conversation + ": \"messages\" must be a list");
    if (conv->contains("tools")) in.tools = (*conv)["tools"];
    if (conv->contains("add_generation_prompt")) {
      const auto& g = (*conv)["add_generation_prompt"];
      if (!g.is_boolean()) return fail(o.conversation + ": add_generation_prompt must be true or false");
      in.add_generation_prompt = g.get<bool>();
    }
  } else {
    return fail(o.conversation + ": expected a list of messages or an object with \"messages\"");
  }
  if (o.no_generation_prompt) in.add_generation_prompt = false;
  if (!o.vars.empty()) {
    auto vars = read_json(o.vars);
    if (!vars.is_ok()) return fail(vars.status().to_string());
    if (!vars->is_object()) return fail(o.vars + ": expected a JSON object of variables");
    in.vars = *vars;
  }
  if (!o.date.empty()) {
    std::tm t{};
    if (strptime(o.date.c_str(), "%Y-%m-%d", &t) == nullptr) return fail("--date " + o.date + ": expected YYYY-MM-DD");
    std::mktime(&t);  // fills the weekday and day of the year
    in.now = t;
  }
  auto out = tmpl->render(in);
  if (!out.is_ok()) return fail(out.status().to_string());
  std::fwrite(out->data(), 1, out->size(), stdout);
  return 0;
}

}  // namespace

Runner add_template(CLI::App& app) {
  auto o = std::make_shared<TemplateOptions>();
  app.add_option("template", o->source, "A .jinja chat template, or a model (GGUF, orkpack) whose template to use")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("conversation", o->conversation,
                 "JSON: a list of messages, or {\"messages\": [...], \"add_generation_prompt\": ..., \"tools\": [...]}")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--vars", o->vars, "JSON object of other variables (bos_token, eos_token, enable_thinking, ...)")
      ->check(CLI::ExistingFile);
  app.add_option("--date", o->date, "The date strftime_now() sees (YYYY-MM-DD; default: today)");
  app.add_flag("--no-generation-prompt", o->no_generation_prompt, "Render with add_generation_prompt false");
  return [o] { return run_template(*o); };
}

}  // namespace ork::cli
