// ork's C++ API: load a model (GGUF or orkpack), make sessions (each with
// its own KV cache), tokenize and detokenize, evaluate batches and read
// logits, sample with a sampler chain, render the model's chat template,
// and generate with a streaming callback and stop conditions. The C API
// (ork.h) is a thin layer over this one; ork's own CLI and server use it.
//
// Units: token ids are int32; lengths count tokens unless they say bytes;
// times are seconds. Ownership: factories return unique_ptrs; a Session
// borrows its Model, which must outlive it. Threads: a Model is immutable
// after load and may be shared by sessions on any threads; a Session and a
// Sampler are used by one thread at a time. Failure: every fallible call
// returns Status / Result with a message naming the file, key or value;
// nothing throws.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ork/status.h"

namespace ork {

class Context;
class Model;
class ChatTemplate;

namespace api {

struct ModelOptions {
  // Map the file instead of reading it into memory of its own (on huge
  // pages): starts faster and shares the page cache; decode is slower.
  bool mmap = false;
  // Threads of the process-wide pool every session runs on (0: all cores).
  // Set by the first load; later loads leave it.
  int threads = 0;
  // Bytes of memory the model may take with one session's KV cache of
  // min(n_ctx_train, 4096) positions (0: what is available, less a margin).
  // A Mixture-of-Experts orkpack that does not fit keeps its routed experts
  // on disk and reads them on demand into an expert cache of what is left;
  // any other model loads as it would without a budget.
  uint64_t mem_bytes = 0;
  // Which cached expert gives way to a miss: "lru" (default; also "") or "lfu".
  std::string expert_policy = "lru";
};

class LoadedModel {
 public:
  // A GGUF or an orkpack, whichever the file is.
  static Result<std::unique_ptr<LoadedModel>> load(const std::string& path, const ModelOptions& options = {});
  // A model whose file is already in memory (`name` stands for its path).
  static Result<std::unique_ptr<LoadedModel>> from_bytes(std::vector<uint8_t> bytes, const std::string& name);
  // A model ork's own tools loaded themselves (e.g. a GGUF converted in
  // memory); for code built with ork's internal headers.
  static Result<std::unique_ptr<LoadedModel>> adopt(std::unique_ptr<Model> model);
  ~LoadedModel();

  const std::string& path() const;
  std::string architecture() const;
  int n_vocab() const;
  int n_ctx_train() const;
  int n_layer() const;
  int n_embd() const;
  uint64_t n_params() const;
  uint64_t weight_bytes() const;
  bool resident() const;  // read into memory (not mapped)

  int32_t bos() const;  // -1: none
  int32_t eos() const;
  bool add_bos() const;
  // End of generation: EOS, EOT and the like.
  bool is_end_of_generation(int32_t token) const;
  std::vector<int32_t> tokenize(std::string_view text, bool add_special = true, bool parse_special = true) const;
  // A prompt as generation takes it: special tokens parsed and the
  // vocabulary's BOS added - once, also when the text (a rendered chat
  // template) writes its own.
  std::vector<int32_t> tokenize_prompt(std::string_view text) const;
  // The bytes of one token (a piece of a UTF-8 character is possible).
  std::string piece(int32_t token, bool special = false) const;
  std::string detokenize(std::span<const int32_t> tokens, bool special = false) const;
  // A metadata string ("general.name", "tokenizer.chat_template"); empty if absent.
  std::string metadata(const std::string& key) const;

  // The chat template in use: the model's own, or ChatML when it has none
  // (has_chat_template() false), or one set here ("chatml", or Jinja source).
  bool has_chat_template() const;
  const ChatTemplate& chat_template() const;
  Status set_chat_template(const std::string& source, const std::string& name);
  // The prompt for a conversation (an OpenAI-style JSON array of messages;
  // `tools` a JSON array or empty), with the model's bos/eos tokens passed
  // to the template as transformers does.
  Result<std::string> apply_chat_template(std::string_view messages_json, bool add_generation_prompt,
                                          std::string_view tools_json = {}, std::string_view vars_json = {}) const;

  const Model& internal() const;  // ork's own tools only

 private:
  LoadedModel();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The sampler chain, in llama.cpp's order: repetition penalty, top-k,
// top-p, min-p, temperature, then a draw (temperature 0: greedy).
struct SamplerOptions {
  float temperature = 0.8f;
  int top_k = 40;           // 0: off
  float top_p = 0.95f;      // 1: off
  float min_p = 0.05f;      // 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  uint64_t seed = 0;        // deterministic for a given seed
};
// A clear error naming the first value out of range (temperature < 0,
// top_p outside [0, 1], ...).
Status validate(const SamplerOptions& o);

class Sampler {
 public:
  static Result<std::unique_ptr<Sampler>> create(const SamplerOptions& options);
  ~Sampler();
  int32_t sample(std::span<const float> logits);
  // Counts a token the sampler did not choose (the prompt) for the penalty.
  void accept(int32_t token);
  const SamplerOptions& options() const { return options_; }

 private:
  Sampler() = default;
  SamplerOptions options_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct SessionOptions {
  int n_ctx = 0;  // positions the KV cache holds (0: the model's trained context, at most 4096)
  // The KV cache's key and value types, llama.cpp's --cache-type-k/-v:
  // "f16", or "q8_0" (int8 and a scale per 32 values: about half the bytes;
  // q8_0 values need q8_0 keys). Anything else fails create().
  std::string cache_type_k = "f16", cache_type_v = "f16";
};

struct GenerateOptions {
  int max_tokens = 128;            // tokens to generate at most
  std::vector<std::string> stop;   // generation ends before any of these strings
  bool ignore_eos = false;
  // Called once the prompt is evaluated, before the first token is sampled
  // (ork's tools take their prefill statistics there).
  std::function<void()> after_prompt;
};

struct GenerateResult {
  std::string text;             // the generated text, stop string excluded
  int prompt_tokens = 0;        // tokens of the prompt
  int prompt_evaluated = 0;     // of which evaluated now (the rest were cached)
  int generated_tokens = 0;
  std::string stop_reason;      // "length", "stop" (a stop string), "eos", "context", "cancelled"
  double prompt_seconds = 0, generate_seconds = 0;
};

// Called with each piece of text as it is generated (whole UTF-8
// characters; text that may begin a stop string is held back until it is
// known not to); returning false stops generation ("cancelled").
using StreamCallback = std::function<bool(std::string_view text)>;

// Turns generated pieces into text to show: whole UTF-8 characters only,
// text that may begin a stop string held back until it is known not to,
// and the stop found (the text before it is the last shown). What
// Session::generate streams through, and what a server's slots use.
class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop = {});
  // Adds one token's piece; returns the text that may now be shown (empty
  // when all of it is held back). After a stop string, stopped() is true
  // and nothing more is taken.
  std::string_view push(std::string_view piece);
  // At the end of generation (not after a stop): whatever was held back.
  std::string_view finish();
  bool stopped() const { return stopped_; }
  // All the text so far, a stop string and what follows it excluded.
  const std::string& text() const { return text_; }

 private:
  std::string_view show(size_t upto);
  std::vector<std::string> stop_;
  std::string text_;
  size_t shown_ = 0;
  bool stopped_ = false;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> create(LoadedModel& model, const SessionOptions& options = {});
  ~Session();

  int n_ctx() const;
  int n_past() const;
  // The tokens the cache holds, in order.
  const std::vector<int32_t>& tokens() const;

  // Evaluates tokens at n_past() onwards as one batch; logits() then holds
  // the last one's next-token scores (n_vocab floats).
  Status eval(std::span<const int32_t> tokens);
  std::span<const float> logits() const;
  // Forgets positions from n onwards and returns the positions kept: n, or
  // fewer (0) for a hybrid model (lfm2) whose short convolutions no longer
  // hold their inputs at n; evaluate tokens() from there on.
  int truncate(int n);
  // Several sessions of one model evaluated as one batch (continuous
  // batching): sessions[i] takes tokens[i] at its own positions, and its
  // logits() then hold its last token's scores. The weights stream once
  // for all of them. Each session at most once; on an error none changes.
  static Status eval_together(std::span<Session* const> sessions, std::span<const std::span<const int32_t>> tokens);

  // Generates after `prompt`: the longest prefix of it already in the cache
  // is kept (only the rest is evaluated), then tokens are sampled until
  // max_tokens, end of generation, a stop string, a full context or the
  // callback's false. The sampler sees the prompt first.
  Result<GenerateResult> generate(std::span<const int32_t> prompt, Sampler& sampler, const GenerateOptions& options,
                                  const StreamCallback& on_text = nullptr);

  // The cache (its tokens and KV state) to a file and back, for the same
  // model; the file is written safely (a temporary renamed into place).
  Status save(const std::string& path) const;
  Status load(const std::string& path);

  Context& context();  // ork's own tools only (stats, profile, NPU)

 private:
  Session() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace api
}  // namespace ork
