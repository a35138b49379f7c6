// The C++ API (include/ork/ork.hpp) over the model layer.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/thread_pool.h"
#include "model/chat/chat_template.h"
#include "model/forward.h"
#include "model/sampler.h"
#include "model/tokenizer/tokenizer.h"
#include "ork/ork.hpp"

namespace ork::api {

// ---------------------------------------------------------------- model

struct LoadedModel::Impl {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  ChatTemplate chat;
  bool own_template = false;
};

LoadedModel::LoadedModel() : impl_(std::make_unique<Impl>()) {}
LoadedModel::~LoadedModel() = default;

namespace {

// The tokenizer and chat template of a loaded model.
Status attach_vocabulary(const Model& m, std::unique_ptr<Tokenizer>* tokenizer, ChatTemplate* chat, bool* own) {
  ORK_ASSIGN_OR_RETURN(*tokenizer, Tokenizer::from_gguf(m.gguf()));
  if ((*tokenizer)->n_vocab() != m.config().n_vocab) {
    return error(StatusCode::kCorrupt, "{}: the vocabulary has {} tokens but token_embd has {} rows", m.path(),
                 (*tokenizer)->n_vocab(), m.config().n_vocab);
  }
  if (auto source = m.gguf().find_string("tokenizer.chat_template")) {
    ORK_ASSIGN_OR_RETURN(*chat, ChatTemplate::parse(*source, m.path() + " (tokenizer.chat_template)"));
    *own = true;
  } else {
    *chat = ChatTemplate::chatml();
    *own = false;
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<LoadedModel>> LoadedModel::load(const std::string& path, const ModelOptions& options) {
  if (options.threads > 0) ThreadPool::set_default_threads(options.threads);
  ExpertCacheOptions cache;
  if (options.expert_policy == "lfu") {
    cache.policy = ExpertPolicy::kLfu;
  } else if (options.expert_policy != "lru" && !options.expert_policy.empty()) {
    return error(StatusCode::kInvalidArgument, "expert_policy '{}': not a policy (lru, lfu)", options.expert_policy);
  }
  const auto reserve = [](const ModelConfig& c) {
    return Context::memory_bytes(c, std::min(c.n_ctx_train > 0 ? c.n_ctx_train : 4096, 4096), 512);
  };
  ORK_ASSIGN_OR_RETURN(
      std::unique_ptr<Model> m,
      Model::load_within_budget(path, options.mmap ? MappedFile::Residency::kMapped : MappedFile::Residency::kResident,
                                options.mem_bytes, reserve, cache));
  std::unique_ptr<LoadedModel> out(new LoadedModel());
  Impl& i = *out->impl_;
  ORK_RETURN_IF_ERROR(attach_vocabulary(*m, &i.tokenizer, &i.chat, &i.own_template));
  i.model = std::move(m);
  return out;
}

Result<std::unique_ptr<LoadedModel>> LoadedModel::from_bytes(std::vector<uint8_t> bytes, const std::string& name) {
  ORK_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::parse(MappedFile::from_bytes(std::move(bytes), name)));
  ORK_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, Model::load(std::move(gguf)));
  return adopt(std::move(m));
}

Result<std::unique_ptr<LoadedModel>> LoadedModel::adopt(std::unique_ptr<Model> m) {
  std::unique_ptr<LoadedModel> out(new LoadedModel());
  Impl& i = *out->impl_;
  ORK_RETURN_IF_ERROR(attach_vocabulary(*m, &i.tokenizer, &i.chat, &i.own_template));
  i.model = std::move(m);
  return out;
}

const std::string& LoadedModel::path() const { return impl_->model->path(); }
std::string LoadedModel::architecture() const { return impl_->model->config().arch->name; }
int LoadedModel::n_vocab() const { return impl_->model->config().n_vocab; }
int LoadedModel::n_ctx_train() const { return impl_->model->config().n_ctx_train; }
int LoadedModel::n_layer() const { return impl_->model->config().n_layer; }
int LoadedModel::n_embd() const { return impl_->model->config().n_embd; }
uint64_t LoadedModel::weight_bytes() const { return impl_->model->weight_bytes(); }
bool LoadedModel::resident() const { return impl_->model->resident(); }

uint64_t LoadedModel::n_params() const {
  uint64_t n = 0;
  if (const OrkpackFile* p = impl_->model->orkpack()) {
    for (const OrkpackTensor& t : p->tensors()) {
      uint64_t e = 1;
      for (uint64_t d : t.spec.dims) e *= d;
      n += e;
    }
  } else {
    for (const GgufTensorInfo& t : impl_->model->gguf().tensors()) n += t.elems;
  }
  return n;
}

int32_t LoadedModel::bos() const { return impl_->tokenizer->bos(); }
int32_t LoadedModel::eos() const { return impl_->tokenizer->eos(); }
bool LoadedModel::add_bos() const { return impl_->tokenizer->add_bos(); }
bool LoadedModel::is_end_of_generation(int32_t t) const { return impl_->tokenizer->is_end_of_generation(t); }

std::vector<int32_t> LoadedModel::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  return impl_->tokenizer->encode(std::string(text), add_special, parse_special);
}

std::vector<int32_t> LoadedModel::tokenize_prompt(std::string_view text) const {
  std::vector<int32_t> ids = tokenize(text, /*add_special=*/true, /*parse_special=*/true);
  if (ids.size() >= 2 && bos() >= 0 && ids[0] == bos() && ids[1] == bos()) ids.erase(ids.begin());
  return ids;
}

std::string LoadedModel::piece(int32_t token, bool special) const {
  if (token < 0 || token >= n_vocab()) return {};
  return impl_->tokenizer->piece(token, special);
}

std::string LoadedModel::detokenize(std::span<const int32_t> tokens, bool special) const {
  std::vector<int32_t> ids;
  for (int32_t t : tokens) {
    if (t >= 0 && t < n_vocab()) ids.push_back(t);
  }
  return impl_->tokenizer->decode(ids, special);
}

std::string LoadedModel::metadata(const std::string& key) const {
  return impl_->model->gguf().find_string(key).value_or(std::string());
}

bool LoadedModel::has_chat_template() const { return impl_->own_template; }
const ChatTemplate& LoadedModel::chat_template() const { return impl_->chat; }

Status LoadedModel::set_chat_template(const std::string& source, const std::string& name) {
  if (source == "chatml") {
    impl_->chat = ChatTemplate::chatml();
    return Status::ok();
  }
  ORK_ASSIGN_OR_RETURN(impl_->chat, ChatTemplate::parse(source, name));
  return Status::ok();
}

Result<std::string> LoadedModel::apply_chat_template(std::string_view messages_json, bool add_generation_prompt,
                                                      std::string_view tools_json, std::string_view vars_json) const {
  ChatTemplate::Inputs in;
  auto parse = [](std::string_view text, const char* what, nlohmann::ordered_json* out) -> Status {
    *out = nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (out->is_discarded()) return error(StatusCode::kInvalidArgument, "{} are not valid JSON", what);
    return Status::ok();
  };
  ORK_RETURN_IF_ERROR(parse(messages_json, "the messages", &in.messages));
  if (!in.messages.is_array()) return error(StatusCode::kInvalidArgument, "the messages must be a JSON array");
  if (!tools_json.empty()) ORK_RETURN_IF_ERROR(parse(tools_json, "the tools", &in.tools));
  if (!vars_json.empty()) ORK_RETURN_IF_ERROR(parse(vars_json, "the variables", &in.vars));
  if (!in.vars.is_object()) in.vars = nlohmann::ordered_json::object();
  in.add_generation_prompt = add_generation_prompt;
  // The tokens' text, as transformers passes them to the template.
  const Tokenizer& tok = *impl_->tokenizer;
  if (!in.vars.contains("bos_token") && tok.bos() >= 0) in.vars["bos_token"] = tok.token_text(tok.bos());
  if (!in.vars.contains("eos_token") && tok.eos() >= 0) in.vars["eos_token"] = tok.token_text(tok.eos());
  return impl_->chat.render(in);
}

const Model& LoadedModel::internal() const { return *impl_->model; }

// ---------------------------------------------------------------- sampler

Status validate(const SamplerOptions& o) {
  auto bad = [](const char* name, double v, const char* range) {
    return error(StatusCode::kInvalidArgument, "sampling: {} = {} is outside {}", name, v, range);
  };
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature)) return bad("temperature", o.temperature, "[0, inf)");
  if (o.top_k < 0) return bad("top_k", o.top_k, "[0, n_vocab] (0 = off)");
  if (!(o.top_p >= 0 && o.top_p <= 1)) return bad("top_p", o.top_p, "[0, 1]");
  if (!(o.min_p >= 0 && o.min_p <= 1)) return bad("min_p", o.min_p, "[0, 1]");
  if (!(o.repeat_penalty > 0) || !std::isfinite(o.repeat_penalty)) return bad("repeat_penalty", o.repeat_penalty, "(0, inf)");
  if (o.repeat_last_n < 0) return bad("repeat_last_n", o.repeat_last_n, "[0, inf)");
  return Status::ok();
}

struct Sampler::Impl {
  explicit Impl(const SamplerParams& p) : s(p) {}
  ork::Sampler s;
};

Sampler::~Sampler() = default;

Result<std::unique_ptr<Sampler>> Sampler::create(const SamplerOptions& o) {
  ORK_RETURN_IF_ERROR(validate(o));
  SamplerParams p;
  p.temperature = o.temperature;
  p.top_k = o.top_k;
  p.top_p = o.top_p;
  p.min_p = o.min_p;
  p.repeat_penalty = o.repeat_penalty;
  p.repeat_last_n = o.repeat_last_n;
  p.seed = o.seed;
  std::unique_ptr<Sampler> s(new Sampler());
  s->options_ = o;
  s->impl_ = std::make_unique<Impl>(p);
  return s;
}

int32_t Sampler::sample(std::span<const float> logits) { return impl_->s.sample(logits); }
void Sampler::accept(int32_t token) { impl_->s.accept(token); }

// ---------------------------------------------------------------- session

struct Session::Impl {
  LoadedModel* model = nullptr;
  std::unique_ptr<Context> ctx;
  std::vector<int32_t> tokens;
  std::vector<float> logits;
};

Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::create(LoadedModel& model, const SessionOptions& o) {
  if (o.n_ctx < 0) return error(StatusCode::kInvalidArgument, "session: n_ctx {} is negative", o.n_ctx);
  const ModelConfig& c = model.internal().config();
  const int n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(c.n_ctx_train, 4096);
  KvTypes kv;
  for (auto [name, type, flag] : {std::tuple{o.cache_type_k, &kv.k, "cache_type_k"}, {o.cache_type_v, &kv.v, "cache_type_v"}}) {
    const std::optional<KvType> t = kv_type_from_name(name);
    if (!t) return error(StatusCode::kInvalidArgument, "session: {} \"{}\" is not a cache type (f16, q8_0)", flag, name);
    *type = *t;
  }
  ORK_RETURN_IF_ERROR(Context::check_kv_types(c, kv));
  std::unique_ptr<Session> s(new Session());
  s->impl_ = std::make_unique<Impl>();
  s->impl_->model = &model;
  s->impl_->ctx = std::make_unique<Context>(model.internal(), n_ctx);
  ORK_RETURN_IF_ERROR(s->impl_->ctx->set_kv_types(kv));
  return s;
}

int Session::n_ctx() const { return impl_->ctx->n_ctx(); }
int Session::n_past() const { return impl_->ctx->n_past(); }
const std::vector<int32_t>& Session::tokens() const { return impl_->tokens; }
std::span<const float> Session::logits() const { return impl_->logits; }
Context& Session::context() { return *impl_->ctx; }

Status Session::eval(std::span<const int32_t> tokens) {
  if (tokens.empty()) return Status::ok();
  ORK_RETURN_IF_ERROR(impl_->ctx->eval(tokens, impl_->logits));
  impl_->tokens.insert(impl_->tokens.end(), tokens.begin(), tokens.end());
  return Status::ok();
}

Status Session::eval_together(std::span<Session* const> sessions, std::span<const std::span<const int32_t>> tokens) {
  std::vector<Context*> contexts;
  for (Session* s : sessions) contexts.push_back(s->impl_->ctx.get());
  thread_local std::vector<float> logits;
  ORK_RETURN_IF_ERROR(Context::eval_together(contexts, tokens, logits));
  const size_t vocab = logits.size() / std::max<size_t>(1, sessions.size());
  for (size_t i = 0; i < sessions.size(); ++i) {
    Impl& s = *sessions[i]->impl_;
    s.logits.assign(logits.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                    logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
    s.tokens.insert(s.tokens.end(), tokens[i].begin(), tokens[i].end());
  }
  return Status::ok();
}

int Session::truncate(int n) {
  n = impl_->ctx->truncate(std::clamp(n, 0, n_past()));
  impl_->tokens.resize(static_cast<size_t>(n));
  return n;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<GenerateResult> Session::generate(std::span<const int32_t> prompt, Sampler& sampler, const GenerateOptions& o,
                                         const StreamCallback& on_text) {
  if (prompt.empty()) return error(StatusCode::kInvalidArgument, "generate: the prompt has no tokens");
  if (o.max_tokens < 0) return error(StatusCode::kInvalidArgument, "generate: max_tokens {} is negative", o.max_tokens);
  for (const std::string& s : o.stop) {
    if (s.empty()) return error(StatusCode::kInvalidArgument, "generate: a stop string is empty");
  }
  if (static_cast<int>(prompt.size()) >= n_ctx()) {
    return error(StatusCode::kInvalidArgument, "generate: the prompt is {} tokens; the context holds {}", prompt.size(),
                 n_ctx());
  }
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(prompt.size());
  // Keep the longest cached prefix; at least one token is evaluated, for logits.
  size_t keep = 0;
  while (keep < impl_->tokens.size() && keep < prompt.size() && impl_->tokens[keep] == prompt[keep]) ++keep;
  if (keep == prompt.size()) --keep;
  keep = static_cast<size_t>(truncate(static_cast<int>(keep)));
  const auto t0 = std::chrono::steady_clock::now();
  ORK_RETURN_IF_ERROR(eval(prompt.subspan(keep)));
  r.prompt_evaluated = static_cast<int>(prompt.size() - keep);
  r.prompt_seconds = seconds_since(t0);
  for (int32_t t : prompt) sampler.accept(t);
  if (o.after_prompt) o.after_prompt();

  const LoadedModel& m = *impl_->model;
  const auto t1 = std::chrono::steady_clock::now();
  TextStream stream(o.stop);
  r.stop_reason = "length";
  auto show = [&](std::string_view piece) { return piece.empty() || !on_text || on_text(piece); };
  while (r.generated_tokens < o.max_tokens) {
    const int32_t id = sampler.sample(logits());
    if (!o.ignore_eos && m.is_end_of_generation(id)) {
      r.stop_reason = "eos";
      break;
    }
    ++r.generated_tokens;
    const bool go_on = show(stream.push(m.piece(id)));
    if (stream.stopped()) {
      r.stop_reason = "stop";
      break;
    }
    if (!go_on) {
      r.stop_reason = "cancelled";
      break;
    }
    if (r.generated_tokens == o.max_tokens) break;
    if (n_past() >= n_ctx()) {
      r.stop_reason = "context";
      break;
    }
    const int32_t one[1] = {id};
    ORK_RETURN_IF_ERROR(eval(one));
  }
  if (r.stop_reason != "cancelled" && r.stop_reason != "stop") show(stream.finish());
  r.text = stream.text();
  r.generate_seconds = seconds_since(t1);
  return r;
}

Status Session::save(const std::string& path) const { return impl_->ctx->save_state(path, impl_->tokens); }

Status Session::load(const std::string& path) {
  impl_->logits.clear();
  auto tokens = impl_->ctx->load_state(path);
  // A failed load may have overwritten part of the cache: the session is then empty.
  if (!tokens.is_ok()) {
    impl_->tokens.resize(static_cast<size_t>(impl_->ctx->n_past()));
    return tokens.status();
  }
  impl_->tokens = std::move(*tokens);
  return Status::ok();
}

}  // namespace ork::api
