// Loading a model for a command that runs it (run, bench, ppl): read into
// memory on huge pages unless --mmap is given (MappedFile::Residency).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/kv_layout.h"
#include "model/model.h"
#include "model_cache.h"
#include "ork/ork.hpp"

namespace ork::cli {

// Adds the model-loading flags to `app`: --mmap (bound to `mmap`), and
// --no-cache / --no-convert for quantized GGUFs (model_cache.h).
void add_load_flags(CLI::App& app, bool& mmap);
// --npu's profile (empty: none): a float GGUF loaded after this is packed
// for that device (model_cache.h).
void set_convert_npu_profile(const std::string& profile);
// Checks what add_load_flags parsed (--mem): call before loading.
Status check_load_flags();
// The context the command will make (its -c), so that --mem leaves room
// for its KV cache; 0: the model's, at most 4096.
void set_context_hint(int n_ctx);

// Model::load, resident unless `mmap`, of a quantized GGUF's converted
// copy (model_cache.h) unless --no-convert; says on stderr when a file that was
// to be read into memory had to be mapped because it does not fit.
Result<std::unique_ptr<Model>> load_model(const std::string& path, bool mmap);
// The same through the public API (what run, chat and serve use), with the
// same notes on stderr.
Result<std::unique_ptr<api::LoadedModel>> load_api_model(const std::string& path, bool mmap);

// --chat-template: a Jinja file, or "chatml"; empty leaves the model's own.
// The error's message is the line to print (fail(status.message())).
Status set_chat_template_option(api::LoadedModel& model, const std::string& option);

// --cache-type-k and --cache-type-v (-ctk, -ctv: llama.cpp's spellings):
// the KV cache's key and value types, f16 (default) or q8_0. What they
// parsed is cache_types(); the memory checks here count it.
void add_cache_type_flags(CLI::App& app);
KvTypes cache_types();
// The same as a session's options (through the public API).
void set_cache_types(api::SessionOptions& options);

// Checks a context of n_ctx positions (batches of up to n_batch tokens),
// or n_seq of them (the server's slots), before it is made: past the model's trained context is a warning on
// stderr; more memory than this process may take is an error naming -c
// and the sizes.
Status check_context(const Model& model, int n_ctx, int n_batch, bool fast_kernels = true, int n_seq = 1);

}  // namespace ork::cli
