// Building ork serve's response bodies (openai_response.h).
#include "serve/openai_response.h"

namespace ork::serve {

using nlohmann::json;

std::string to_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_body(const HttpError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"code", e.status}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  return {{"error", err}};
}

namespace {

json usage(const Job& job) {
  return {{"prompt_tokens", job.prompt_tokens},
          {"completion_tokens", job.completion_tokens},
          {"total_tokens", job.prompt_tokens + job.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", job.prompt_cached}}}};
}

// llama-server's timing fields, so that its users' tools read them.
json timings(const Job& job) {
  const int evaluated = job.prompt_tokens - job.prompt_cached;
  return {{"prompt_n", evaluated},
          {"cache_n", job.prompt_cached},
          {"prompt_ms", job.prompt_ms},
          {"prompt_per_second", job.prompt_ms > 0 ? evaluated * 1e3 / job.prompt_ms : 0.0},
          {"predicted_n", job.completion_tokens},
          {"predicted_ms", job.predicted_ms},
          {"predicted_per_second", job.predicted_ms > 0 ? job.completion_tokens * 1e3 / job.predicted_ms : 0.0},
          {"slot", job.slot}};
}

json head(const ResponseHead& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}, {"system_fingerprint", "ork-0.1.0"}};
}

}  // namespace

json completion_body(const ResponseHead& h, const Job& job, const std::string& text) {
  json out = head(h, h.chat ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", job.finish_reason}};
  if (h.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  out["choices"] = json::array({choice});
  out["usage"] = usage(job);
  out["timings"] = timings(job);
  return out;
}

json stream_chunk(const ResponseHead& h, const std::string& text, bool first, const std::string& finish_reason,
                  const Job* job) {
  json out = head(h, h.chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}};
  choice["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  if (h.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || !first) delta["content"] = text;
    if (!finish_reason.empty()) delta = json::object();
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  out["choices"] = json::array({choice});
  if (job) out["timings"] = timings(*job);
  return out;
}

json usage_chunk(const ResponseHead& h, const Job& job) {
  json out = head(h, h.chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage(job);
  return out;
}

json models_body(const std::string& id, int64_t created, const api::LoadedModel& model, int n_ctx) {
  json m = {{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "ork"}};
  m["meta"] = {{"architecture", model.architecture()}, {"n_vocab", model.n_vocab()}, {"n_ctx_train", model.n_ctx_train()},
               {"n_ctx_slot", n_ctx}, {"n_params", model.n_params()}, {"size", model.weight_bytes()}};
  return {{"object", "list"}, {"data", json::array({m})}};
}

}  // namespace ork::serve
