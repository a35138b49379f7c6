/* Embedding ork through its C API: load a model, chat with it once through
 * its own template, stream the reply. Build: see examples/CMakeLists.txt.
 * Usage: embed MODEL.gguf ["a question"] */
#include <stdio.h>
#include <string.h>

#include "ork/ork.h"

static int print_text(void* user, const char* text, size_t len) {
  (void)user;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 1; /* go on */
}

static int check(ork_status s, const char* what) {
  if (s != ORK_OK) fprintf(stderr, "embed: %s: %s\n", what, ork_last_error());
  return s == ORK_OK;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf [question]\n", argv[0]);
    return 2;
  }
  const char* question = argc > 2 ? argv[2] : "Tell me a story about a cat.";
  ork_model* model = NULL;
  ork_session* session = NULL;
  ork_sampler* sampler = NULL;
  char* prompt = NULL;
  int rc = 1;

  ork_model_params mp = ork_model_default_params();
  if (!check(ork_model_load(argv[1], &mp, &model), "load")) goto done;

  /* The conversation as OpenAI-style JSON (the question is kept simple
   * here: no quotes or backslashes to escape). */
  char messages[1024];
  snprintf(messages, sizeof messages, "[{\"role\": \"user\", \"content\": \"%s\"}]", question);
  if (!check(ork_model_apply_chat_template(model, messages, 1, &prompt), "chat template")) goto done;

  ork_session_params sp = ork_session_default_params();
  sp.n_ctx = 512;
  if (!check(ork_session_create(model, &sp, &session), "session")) goto done;

  ork_sampler_params smp = ork_sampler_default_params();
  smp.temperature = 0.0f; /* greedy: the same answer every time */
  if (!check(ork_sampler_create(&smp, &sampler), "sampler")) goto done;

  ork_generate_params gp = ork_generate_default_params();
  gp.max_tokens = 64;
  ork_generate_result result;
  if (!check(ork_generate(session, sampler, prompt, &gp, print_text, NULL, &result), "generate")) goto done;
  printf("\n[%d prompt tokens, %d generated in %.3f s; stopped: %s]\n", result.prompt_tokens, result.generated_tokens,
         result.generate_seconds, result.stop_reason);
  rc = 0;

done:
  ork_string_free(prompt);
  ork_sampler_free(sampler);
  ork_session_free(session);
  ork_model_free(model);
  return rc;
}
