/* ork's C API: the convention bindings expect (llama.h's): opaque handles,
 * plain parameter structs with defaults from *_default_params(), status
 * codes, and a message for the last failure on the calling thread.
 *
 * Units: token ids are int32; lengths count tokens unless they say bytes;
 * times are seconds.
 * Ownership: every object made by ork_*_create / ork_model_load is freed by
 * its ork_*_free; strings ork returns through char** are freed with
 * ork_string_free; pointers into ork's memory (logits, error messages) stay
 * valid until the next call on the same object (the same thread).
 * Threads: a model may be used by sessions on several threads; a session
 * and a sampler by one thread at a time. ork_last_error() is per thread.
 * Failure: calls return ORK_OK or a status code and set the message; none
 * aborts the process, none throws. */
#ifndef ORK_H
#define ORK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t ork_token;
typedef struct ork_model ork_model;
typedef struct ork_session ork_session;
typedef struct ork_sampler ork_sampler;

typedef enum {
  ORK_OK = 0,
  ORK_INVALID_ARGUMENT = 1, /* the caller gave something malformed */
  ORK_NOT_FOUND = 2,        /* a file, key or tensor that is not there */
  ORK_UNSUPPORTED = 3,      /* well-formed, but ork does not handle it */
  ORK_CORRUPT = 4,          /* a file whose bytes contradict its format */
  ORK_IO = 5,               /* the operating system refused */
  ORK_INTERNAL = 6,
  ORK_OUT_OF_MEMORY = 7,
  ORK_NUMERICAL = 8         /* NaN or infinity in a computation */
} ork_status;

/* The message of the last failed call on this thread ("" if none). */
const char* ork_last_error(void);
const char* ork_status_name(ork_status status);
void ork_string_free(char* s);

/* ---- models */
typedef struct {
  int mmap;    /* 1: map the file instead of reading it into memory (default 0) */
  int threads; /* threads of the process-wide pool; 0: all cores (default) */
  /* Bytes the model may take with one session's KV cache (0: what is
   * available; default). A Mixture-of-Experts orkpack that does not fit
   * reads its routed experts from disk into an expert cache of the rest. */
  uint64_t mem_bytes;
  const char* expert_policy; /* "lru" or "lfu"; NULL: "lru" (default) */
} ork_model_params;
ork_model_params ork_model_default_params(void);

/* Loads a GGUF or an orkpack. */
ork_status ork_model_load(const char* path, const ork_model_params* params, ork_model** out);
void ork_model_free(ork_model* model);
int32_t ork_model_n_vocab(const ork_model* model);
int32_t ork_model_n_ctx_train(const ork_model* model);
ork_token ork_model_bos(const ork_model* model); /* -1: none */
ork_token ork_model_eos(const ork_model* model);
/* 1 if the token ends generation (EOS, EOT, ...). */
int ork_model_is_eog(const ork_model* model, ork_token token);

/* Tokenizes `text` (text_len bytes; -1: NUL-terminated) into `tokens`.
 * Returns the number of tokens, or minus the number needed when n_max is
 * too small. add_special: BOS (and EOS) where the model asks;
 * parse_special: control tokens written in the text are recognised. */
int32_t ork_tokenize(const ork_model* model, const char* text, int32_t text_len, ork_token* tokens, int32_t n_max,
                     int add_special, int parse_special);
/* The bytes of one token into buf (not NUL-terminated). Returns the number
 * of bytes, or minus the number needed when size is too small. */
int32_t ork_token_to_piece(const ork_model* model, ork_token token, char* buf, int32_t size, int special);

/* The prompt for a conversation: `messages_json` an OpenAI-style JSON array
 * of {"role", "content"} objects, rendered by the model's chat template
 * (ChatML if it has none). *out is malloc'd: free it with ork_string_free. */
ork_status ork_model_apply_chat_template(const ork_model* model, const char* messages_json, int add_generation_prompt,
                                         char** out);

/* ---- sessions: a KV cache and the tokens in it */
typedef struct {
  int32_t n_ctx; /* positions; 0: the model's trained context, at most 4096 */
  /* The KV cache's key and value types: "f16" or "q8_0" (int8 codes and a
   * scale per 32 values, about half the bytes; q8_0 values need q8_0
   * keys), llama.cpp's --cache-type-k/-v. NULL: "f16" (default). */
  const char* cache_type_k;
  const char* cache_type_v;
} ork_session_params;
ork_session_params ork_session_default_params(void);

ork_status ork_session_create(ork_model* model, const ork_session_params* params, ork_session** out);
void ork_session_free(ork_session* session);
int32_t ork_session_n_past(const ork_session* session);
/* Evaluates n tokens at the end of the cache as one batch. */
ork_status ork_session_eval(ork_session* session, const ork_token* tokens, int32_t n);
/* The last evaluated token's next-token scores: n_vocab floats, valid
 * until the next call on this session. NULL before any eval. */
const float* ork_session_logits(const ork_session* session);
/* Forgets the cache from position n_past on. A hybrid model (lfm2) may keep
 * fewer positions (0) when its short convolutions no longer hold their
 * inputs at n_past: ork_session_n_past tells how many remain. */
void ork_session_truncate(ork_session* session, int32_t n_past);
/* The cache (its tokens and KV state) to a file, written safely (a
 * temporary renamed into place), and back into a session of the same
 * model. A load that fails part way leaves the session empty. */
ork_status ork_session_save(const ork_session* session, const char* path);
ork_status ork_session_load(ork_session* session, const char* path);

/* ---- sampling */
typedef struct {
  float temperature; /* 0: greedy (default 0.8) */
  int32_t top_k;     /* 0: off (default 40) */
  float top_p;       /* 1: off (default 0.95) */
  float min_p;       /* 0: off (default 0.05) */
  float repeat_penalty; /* 1: off (default 1) */
  int32_t repeat_last_n; /* default 64 */
  uint64_t seed;     /* default 0 */
} ork_sampler_params;
ork_sampler_params ork_sampler_default_params(void);

ork_status ork_sampler_create(const ork_sampler_params* params, ork_sampler** out);
void ork_sampler_free(ork_sampler* sampler);
ork_token ork_sampler_sample(ork_sampler* sampler, const float* logits, int32_t n_vocab);
void ork_sampler_accept(ork_sampler* sampler, ork_token token);

/* ---- generation */
/* Called with each piece of generated text (whole UTF-8 characters; bytes,
 * not NUL-terminated). Return 0 to stop, non-zero to go on. */
typedef int (*ork_text_callback)(void* user, const char* text, size_t len);

typedef struct {
  int32_t max_tokens;         /* default 128 */
  const char* const* stop;    /* stop strings (may be NULL) */
  int32_t n_stop;
  int ignore_eos;             /* default 0 */
} ork_generate_params;
ork_generate_params ork_generate_default_params(void);

typedef struct {
  int32_t prompt_tokens, prompt_evaluated, generated_tokens;
  const char* stop_reason;    /* "length", "stop", "eos", "context", "cancelled" (static) */
  double prompt_seconds, generate_seconds;
} ork_generate_result;

/* Tokenizes `prompt` (with BOS where the model asks; special tokens
 * recognised), keeps the longest cached prefix, evaluates the rest and
 * generates, calling `on_text` as text arrives. `result` may be NULL. */
ork_status ork_generate(ork_session* session, ork_sampler* sampler, const char* prompt,
                        const ork_generate_params* params, ork_text_callback on_text, void* user,
                        ork_generate_result* result);

#ifdef __cplusplus
}
#endif

#endif /* ORK_H */
