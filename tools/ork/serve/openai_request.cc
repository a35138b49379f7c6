// Reading /v1/chat/completions and /v1/completions bodies (openai_request.h).
#include "serve/openai_request.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ork::serve {
namespace {

using json = nlohmann::ordered_json;

struct Reader {
  const json& body;
  HttpError* err;

  bool fail(const std::string& param, const std::string& message) {
    err->status = 400;
    err->type = "invalid_request_error";
    err->param = param;
    err->message = message;
    return false;
  }
  const json* find(const char* key) const {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  }
  // A number in [lo, hi] (integers allowed), if present.
  bool number(const char* key, double lo, double hi, float* out) {
    const json* v = find(key);
    if (!v) return true;
    if (!v->is_number()) return fail(key, fmt::format("'{}' must be a number", key));
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) return fail(key, fmt::format("'{}' = {} is outside [{}, {}]", key, d, lo, hi));
    *out = static_cast<float>(d);
    return true;
  }
  bool integer(const char* key, int64_t lo, int64_t hi, int64_t* out) {
    const json* v = find(key);
    if (!v) return true;
    if (!v->is_number_integer()) return fail(key, fmt::format("'{}' must be an integer", key));
    if (v->is_number_unsigned() ? v->get<uint64_t>() > static_cast<uint64_t>(hi) : (v->get<int64_t>() < lo || v->get<int64_t>() > hi)) {
      return fail(key, fmt::format("'{}' = {} is outside [{}, {}]", key, v->dump(), lo, hi));
    }
    *out = v->is_number_unsigned() ? static_cast<int64_t>(v->get<uint64_t>()) : v->get<int64_t>();
    return true;
  }
  bool boolean(const char* key, bool* out) {
    const json* v = find(key);
    if (!v) return true;
    if (!v->is_boolean()) return fail(key, fmt::format("'{}' must be true or false", key));
    *out = v->get<bool>();
    return true;
  }
};

// A message's content as text: a string, or an array of text parts.
bool content_text(const json& content, size_t index, Reader& r, std::string* out) {
  const std::string param = fmt::format("messages[{}].content", index);
  if (content.is_string()) {
    *out = content.get<std::string>();
    return true;
  }
  if (content.is_null()) return true;
  if (!content.is_array()) return r.fail(param, param + " must be a string or an array of text parts");
  for (const json& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return r.fail(param, param + ": each part must be an object with a 'type'");
    }
    if (part["type"] != "text") {
      return r.fail(param, fmt::format("{}: parts of type '{}' are not supported (text only)", param,
                                       part["type"].get<std::string>()));
    }
    if (!part.contains("text") || !part["text"].is_string()) return r.fail(param, param + ": a text part needs a string 'text'");
    *out += part["text"].get<std::string>();
  }
  return true;
}

bool read_messages(Reader& r, const api::LoadedModel& model, const RequestLimits& limits, std::string* prompt) {
  const json* messages = r.find("messages");
  if (!messages) return r.fail("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty()) return r.fail("messages", "'messages' must be a non-empty array");
  if (messages->size() > limits.max_messages) {
    return r.fail("messages", fmt::format("'messages' has {} entries; at most {} are taken", messages->size(), limits.max_messages));
  }
  json clean = json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) return r.fail(param, param + " must be an object");
    if (!m.contains("role") || !m["role"].is_string()) return r.fail(param + ".role", param + ".role must be a string");
    json out = m;  // tool_calls, name and the like pass through to the template
    std::string text;
    if (m.contains("content")) {
      if (!content_text(m["content"], i, r, &text)) return false;
    } else if (!m.contains("tool_calls")) {
      return r.fail(param + ".content", param + " has no content");
    }
    out["content"] = text;
    clean.push_back(std::move(out));
  }
  std::string tools;
  if (const json* t = r.find("tools")) {
    if (!t->is_array()) return r.fail("tools", "'tools' must be an array");
    tools = t->dump();
  }
  auto rendered = model.apply_chat_template(clean.dump(), /*add_generation_prompt=*/true, tools);
  if (!rendered.is_ok()) {
    r.err->status = 400;
    r.err->param = "messages";
    r.err->message = "the chat template cannot render this conversation: " + rendered.status().message();
    return false;
  }
  *prompt = std::move(*rendered);
  return true;
}

bool read_prompt(Reader& r, const api::LoadedModel& model, std::vector<int32_t>* tokens, std::string* text) {
  const json* p = r.find("prompt");
  if (!p) return r.fail("prompt", "'prompt' is required");
  if (p->is_string()) {
    *text = p->get<std::string>();
    return true;
  }
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    *text = (*p)[0].get<std::string>();
    return true;
  }
  if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    for (const json& t : *p) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.n_vocab()) {
        return r.fail("prompt", fmt::format("'prompt' token ids must be integers in [0, {})", model.n_vocab()));
      }
      tokens->push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return true;
  }
  if (p->is_array() && p->size() > 1) return r.fail("prompt", "one prompt per request ('prompt' arrays of several strings are not supported)");
  return r.fail("prompt", "'prompt' must be a string or an array of token ids");
}

bool read_stop(Reader& r, const RequestLimits& limits, std::vector<std::string>* stop) {
  const json* s = r.find("stop");
  if (!s) return true;
  auto add = [&](const json& v) {
    if (!v.is_string()) return r.fail("stop", "'stop' must be a string or an array of strings");
    const std::string text = v.get<std::string>();
    if (text.size() > limits.max_stop_bytes) return r.fail("stop", fmt::format("a stop string is longer than {} bytes", limits.max_stop_bytes));
    if (!text.empty()) stop->push_back(text);
    return true;
  };
  if (s->is_array()) {
    if (s->size() > limits.max_stop_strings) return r.fail("stop", fmt::format("at most {} stop strings", limits.max_stop_strings));
    for (const json& v : *s) {
      if (!add(v)) return false;
    }
    return true;
  }
  return add(*s);
}

bool read_sampling(Reader& r, CompletionRequest* out) {
  api::SamplerOptions& s = out->sampling;
  int64_t top_k = s.top_k, last_n = s.repeat_last_n, seed = -1, n = 1;
  if (!r.number("temperature", 0, 100, &s.temperature) || !r.number("top_p", 0, 1, &s.top_p) ||
      !r.number("min_p", 0, 1, &s.min_p) || !r.integer("top_k", 0, 1 << 24, &top_k) ||
      !r.number("repeat_penalty", 1e-6, 100, &s.repeat_penalty) || !r.integer("repeat_last_n", 0, 1 << 20, &last_n) ||
      !r.integer("seed", -1, INT64_MAX, &seed) || !r.integer("n", 1, 1, &n)) {
    return false;
  }
  s.top_k = static_cast<int>(top_k);
  s.repeat_last_n = static_cast<int>(last_n);
  if (seed >= 0) {
    s.seed = static_cast<uint64_t>(seed);
    out->seed_given = true;
  }
  for (const char* key : {"presence_penalty", "frequency_penalty"}) {
    float v = 0;
    if (!r.number(key, -2, 2, &v)) return false;
    if (v != 0) return r.fail(key, fmt::format("'{}' is not supported (use repeat_penalty)", key));
  }
  bool logprobs = false;
  if (!r.boolean("logprobs", &logprobs)) return false;
  if (logprobs) return r.fail("logprobs", "'logprobs' is not supported");
  if (const json* f = r.find("response_format")) {
    if (!f->is_object() || !f->contains("type") || (*f)["type"] != "text") {
      return r.fail("response_format", "only response_format {\"type\": \"text\"} is supported");
    }
  }
  return true;
}

}  // namespace

bool parse_request(std::string_view body, bool chat, const api::LoadedModel& model, const RequestLimits& limits,
                   CompletionRequest* out, HttpError* err) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  Reader r{doc, err};
  if (doc.is_discarded()) return r.fail("", "the body is not valid JSON (UTF-8)");
  if (!doc.is_object()) return r.fail("", "the body must be a JSON object");
  try {
    *out = CompletionRequest{};
    out->chat = chat;
    if (const json* m = r.find("model")) {
      if (!m->is_string()) return r.fail("model", "'model' must be a string");
      out->model = m->get<std::string>();
    }
    int64_t max_tokens = -1;
    for (const char* key : {"max_tokens", "max_completion_tokens", "n_predict"}) {
      if (!r.integer(key, -1, 1 << 20, &max_tokens)) return false;
    }
    out->max_tokens = static_cast<int>(max_tokens);
    if (!read_sampling(r, out) || !read_stop(r, limits, &out->stop) || !r.boolean("stream", &out->stream) ||
        !r.boolean("ignore_eos", &out->ignore_eos)) {
      return false;
    }
    if (const json* so = r.find("stream_options")) {
      if (!so->is_object()) return r.fail("stream_options", "'stream_options' must be an object");
      Reader inner{*so, err};
      if (!inner.boolean("include_usage", &out->include_usage)) return false;
    }
    std::string text;
    if (chat) {
      if (!read_messages(r, model, limits, &text)) return false;
    } else if (!read_prompt(r, model, &out->prompt, &text)) {
      return false;
    }
    if (out->prompt.empty()) {
      out->prompt = model.tokenize_prompt(text);
      if (out->prompt.empty()) return r.fail(chat ? "messages" : "prompt", "the prompt has no tokens");
    }
    return true;
  } catch (const nlohmann::json::exception& e) {
    return r.fail("", std::string("the body could not be read: ") + e.what());
  }
}

}  // namespace ork::serve
