// The C API (include/ork/ork.h) over the C++ one.
#include <cstdlib>
#include <cstring>
#include <new>

#include "ork/ork.h"
#include "ork/ork.hpp"

struct ork_model {
  std::unique_ptr<ork::api::LoadedModel> m;
};
struct ork_session {
  std::unique_ptr<ork::api::Session> s;
  ork_model* model;
};
struct ork_sampler {
  std::unique_ptr<ork::api::Sampler> s;
};

namespace {

thread_local std::string g_last_error;

ork_status code_of(ork::StatusCode c) {
  switch (c) {
    case ork::StatusCode::kOk: return ORK_OK;
    case ork::StatusCode::kInvalidArgument: return ORK_INVALID_ARGUMENT;
    case ork::StatusCode::kNotFound: return ORK_NOT_FOUND;
    case ork::StatusCode::kUnsupported: return ORK_UNSUPPORTED;
    case ork::StatusCode::kCorrupt: return ORK_CORRUPT;
    case ork::StatusCode::kIo: return ORK_IO;
    case ork::StatusCode::kResourceExhausted: return ORK_OUT_OF_MEMORY;
    case ork::StatusCode::kNumerical: return ORK_NUMERICAL;
    default: return ORK_INTERNAL;
  }
}

ork_status fail(const ork::Status& s) {
  g_last_error = s.to_string();
  return code_of(s.code());
}

ork_status fail(ork_status code, const char* message) {
  g_last_error = message;
  return code;
}

// Nothing escapes the C boundary: an allocation failure is a status.
template <typename F>
ork_status guarded(F&& f) {
  try {
    g_last_error.clear();
    return f();
  } catch (const std::bad_alloc&) {
    return fail(ORK_OUT_OF_MEMORY, "out of memory");
  } catch (...) {
    return fail(ORK_INTERNAL, "internal error");
  }
}

}  // namespace

extern "C" {

const char* ork_last_error(void) { return g_last_error.c_str(); }

const char* ork_status_name(ork_status s) {
  switch (s) {
    case ORK_OK: return "ok";
    case ORK_INVALID_ARGUMENT: return "invalid argument";
    case ORK_NOT_FOUND: return "not found";
    case ORK_UNSUPPORTED: return "unsupported";
    case ORK_CORRUPT: return "corrupt";
    case ORK_IO: return "i/o error";
    case ORK_INTERNAL: return "internal error";
    case ORK_OUT_OF_MEMORY: return "out of memory";
    case ORK_NUMERICAL: return "numerical error";
  }
  return "unknown";
}

void ork_string_free(char* s) { std::free(s); }

ork_model_params ork_model_default_params(void) { return {0, 0, 0, nullptr}; }

ork_status ork_model_load(const char* path, const ork_model_params* params, ork_model** out) {
  return guarded([&] {
    if (path == nullptr || out == nullptr) return fail(ORK_INVALID_ARGUMENT, "ork_model_load: path and out are required");
    *out = nullptr;
    ork::api::ModelOptions o;
    if (params != nullptr) {
      o.mmap = params->mmap != 0;
      o.threads = params->threads;
      o.mem_bytes = params->mem_bytes;
      if (params->expert_policy != nullptr) o.expert_policy = params->expert_policy;
    }
    auto m = ork::api::LoadedModel::load(path, o);
    if (!m.is_ok()) return fail(m.status());
    *out = new ork_model{std::move(m).value()};
    return ORK_OK;
  });
}

void ork_model_free(ork_model* model) { delete model; }
int32_t ork_model_n_vocab(const ork_model* m) { return m != nullptr ? m->m->n_vocab() : 0; }
int32_t ork_model_n_ctx_train(const ork_model* m) { return m != nullptr ? m->m->n_ctx_train() : 0; }
ork_token ork_model_bos(const ork_model* m) { return m != nullptr ? m->m->bos() : -1; }
ork_token ork_model_eos(const ork_model* m) { return m != nullptr ? m->m->eos() : -1; }
int ork_model_is_eog(const ork_model* m, ork_token t) { return m != nullptr && m->m->is_end_of_generation(t) ? 1 : 0; }

int32_t ork_tokenize(const ork_model* model, const char* text, int32_t text_len, ork_token* tokens, int32_t n_max,
                     int add_special, int parse_special) {
  if (model == nullptr || text == nullptr) return 0;
  const size_t len = text_len < 0 ? std::strlen(text) : static_cast<size_t>(text_len);
  const std::vector<int32_t> ids = model->m->tokenize(std::string_view(text, len), add_special != 0, parse_special != 0);
  const auto n = static_cast<int32_t>(ids.size());
  if (n > n_max || (n > 0 && tokens == nullptr)) return -n;
  std::copy(ids.begin(), ids.end(), tokens);
  return n;
}

int32_t ork_token_to_piece(const ork_model* model, ork_token token, char* buf, int32_t size, int special) {
  if (model == nullptr) return 0;
  const std::string p = model->m->piece(token, special != 0);
  const auto n = static_cast<int32_t>(p.size());
  if (n > size || (n > 0 && buf == nullptr)) return -n;
  std::memcpy(buf, p.data(), p.size());
  return n;
}

ork_status ork_model_apply_chat_template(const ork_model* model, const char* messages_json, int add_generation_prompt,
                                         char** out) {
  return guarded([&] {
    if (model == nullptr || messages_json == nullptr || out == nullptr) {
      return fail(ORK_INVALID_ARGUMENT, "ork_model_apply_chat_template: model, messages_json and out are required");
    }
    *out = nullptr;
    auto text = model->m->apply_chat_template(messages_json, add_generation_prompt != 0);
    if (!text.is_ok()) return fail(text.status());
    *out = static_cast<char*>(std::malloc(text->size() + 1));
    if (*out == nullptr) return fail(ORK_OUT_OF_MEMORY, "out of memory");
    std::memcpy(*out, text->c_str(), text->size() + 1);
    return ORK_OK;
  });
}

ork_session_params ork_session_default_params(void) { return {0, nullptr, nullptr}; }

ork_status ork_session_create(ork_model* model, const ork_session_params* params, ork_session** out) {
  return guarded([&] {
    if (model == nullptr || out == nullptr) return fail(ORK_INVALID_ARGUMENT, "ork_session_create: model and out are required");
    *out = nullptr;
    ork::api::SessionOptions o;
    if (params != nullptr) {
      o.n_ctx = params->n_ctx;
      if (params->cache_type_k != nullptr) o.cache_type_k = params->cache_type_k;
      if (params->cache_type_v != nullptr) o.cache_type_v = params->cache_type_v;
    }
    auto s = ork::api::Session::create(*model->m, o);
    if (!s.is_ok()) return fail(s.status());
    *out = new ork_session{std::move(s).value(), model};
    return ORK_OK;
  });
}

void ork_session_free(ork_session* session) { delete session; }
int32_t ork_session_n_past(const ork_session* s) { return s != nullptr ? s->s->n_past() : 0; }

ork_status ork_session_eval(ork_session* session, const ork_token* tokens, int32_t n) {
  return guarded([&] {
    if (session == nullptr || (n > 0 && tokens == nullptr) || n < 0) {
      return fail(ORK_INVALID_ARGUMENT, "ork_session_eval: a session and n >= 0 tokens are required");
    }
    const ork::Status s = session->s->eval(std::span<const int32_t>(tokens, static_cast<size_t>(n)));
    return s.is_ok() ? ORK_OK : fail(s);
  });
}

const float* ork_session_logits(const ork_session* s) {
  if (s == nullptr || s->s->logits().empty()) return nullptr;
  return s->s->logits().data();
}

void ork_session_truncate(ork_session* s, int32_t n_past) {
  if (s != nullptr) s->s->truncate(n_past);
}

ork_status ork_session_save(const ork_session* s, const char* path) {
  return guarded([&] {
    if (s == nullptr || path == nullptr) return fail(ORK_INVALID_ARGUMENT, "ork_session_save: session and path are required");
    const ork::Status st = s->s->save(path);
    return st.is_ok() ? ORK_OK : fail(st);
  });
}

ork_status ork_session_load(ork_session* s, const char* path) {
  return guarded([&] {
    if (s == nullptr || path == nullptr) return fail(ORK_INVALID_ARGUMENT, "ork_session_load: session and path are required");
    const ork::Status st = s->s->load(path);
    return st.is_ok() ? ORK_OK : fail(st);
  });
}

ork_sampler_params ork_sampler_default_params(void) {
  const ork::api::SamplerOptions d;
  return {d.temperature, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.repeat_last_n, d.seed};
}

ork_status ork_sampler_create(const ork_sampler_params* p, ork_sampler** out) {
  return guarded([&] {
    if (out == nullptr) return fail(ORK_INVALID_ARGUMENT, "ork_sampler_create: out is required");
    *out = nullptr;
    ork::api::SamplerOptions o;
    if (p != nullptr) {
      o.temperature = p->temperature;
      o.top_k = p->top_k;
      o.top_p = p->top_p;
      o.min_p = p->min_p;
      o.repeat_penalty = p->repeat_penalty;
      o.repeat_last_n = p->repeat_last_n;
      o.seed = p->seed;
    }
    auto s = ork::api::Sampler::create(o);
    if (!s.is_ok()) return fail(s.status());
    *out = new ork_sampler{std::move(s).value()};
    return ORK_OK;
  });
}

void ork_sampler_free(ork_sampler* s) { delete s; }

ork_token ork_sampler_sample(ork_sampler* s, const float* logits, int32_t n_vocab) {
  if (s == nullptr || logits == nullptr || n_vocab <= 0) return -1;
  return s->s->sample(std::span<const float>(logits, static_cast<size_t>(n_vocab)));
}

void ork_sampler_accept(ork_sampler* s, ork_token t) {
  if (s != nullptr) s->s->accept(t);
}

ork_generate_params ork_generate_default_params(void) { return {128, nullptr, 0, 0}; }

ork_status ork_generate(ork_session* session, ork_sampler* sampler, const char* prompt, const ork_generate_params* params,
                        ork_text_callback on_text, void* user, ork_generate_result* result) {
  return guarded([&] {
    if (session == nullptr || sampler == nullptr || prompt == nullptr) {
      return fail(ORK_INVALID_ARGUMENT, "ork_generate: session, sampler and prompt are required");
    }
    ork::api::GenerateOptions o;
    if (params != nullptr) {
      if (params->n_stop < 0 || (params->n_stop > 0 && params->stop == nullptr)) {
        return fail(ORK_INVALID_ARGUMENT, "ork_generate: n_stop stop strings are needed");
      }
      o.max_tokens = params->max_tokens;
      o.ignore_eos = params->ignore_eos != 0;
      for (int32_t i = 0; i < params->n_stop; ++i) {
        if (params->stop[i] != nullptr) o.stop.emplace_back(params->stop[i]);
      }
    }
    std::vector<int32_t> ids = session->model->m->tokenize(prompt, true, true);
    if (ids.empty() && session->model->m->bos() >= 0) ids.push_back(session->model->m->bos());
    auto r = session->s->generate(ids, *sampler->s, o, [&](std::string_view text) {
      return on_text == nullptr || on_text(user, text.data(), text.size()) != 0;
    });
    if (!r.is_ok()) return fail(r.status());
    if (result != nullptr) {
      static const char* kReasons[] = {"length", "stop", "eos", "context", "cancelled"};
      result->stop_reason = "length";
      for (const char* k : kReasons) {
        if (r->stop_reason == k) result->stop_reason = k;
      }
      result->prompt_tokens = r->prompt_tokens;
      result->prompt_evaluated = r->prompt_evaluated;
      result->generated_tokens = r->generated_tokens;
      result->prompt_seconds = r->prompt_seconds;
      result->generate_seconds = r->generate_seconds;
    }
    return ORK_OK;
  });
}

}  // extern "C"
