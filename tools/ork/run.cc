// ork run: tokenize a prompt, prefill it in one batch, then sample and
// stream tokens until -n, end of generation or a full context.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "builtin_model.h"
#include "commands.h"
#include "expert_report.h"
#include "load_model.h"
#include "profile_report.h"
#include "sampling_cli.h"
#include "npu_cli.h"
#include "core/escape.h"
#include "core/thread_pool.h"
#include "model/forward.h"
#include "ork/ork.hpp"

namespace ork::cli {
namespace {

struct RunOptions {
  bool mmap = false;
  std::string model;
  std::string prompt;
  std::string prompt_file;
  int n_predict = 128;
  int n_ctx = 0;
  bool ignore_eos = false;
  int threads = 0;
  NpuCli npu;
  bool stats = false;
  bool profile = false;
  SamplingCli sampling;
  std::vector<std::string> stop;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Token pieces come from the model file: no control sequence of theirs
// reaches the terminal (newlines and tabs do).
void print(std::string_view text) {
  const std::string safe = escape_stream_text(text);
  std::fwrite(safe.data(), 1, safe.size(), stdout);
  std::fflush(stdout);
}

const char* stop_message(const std::string& reason) {
  if (reason == "eos") return "end of text";
  if (reason == "context") return "context full";
  if (reason == "stop") return "a stop string";
  return "reached -n";
}

void print_stats(const Model& model, const Context::MoeStats& s, const Context::MoeStats& before_gen, int generated);

int run(RunOptions& opt) {
  std::string prompt = opt.prompt;
  if (!opt.prompt_file.empty()) {
    std::ifstream in(opt.prompt_file, std::ios::binary);
    if (!in) return fail(opt.prompt_file + ": cannot read the prompt file");
    prompt.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (opt.model.empty() && prompt.empty()) prompt = "Once upon a time";
  if (opt.threads > 0) ThreadPool::set_default_threads(opt.threads);

  const auto t_load = std::chrono::steady_clock::now();
  set_context_hint(opt.n_ctx);
  auto loaded = opt.model.empty() ? load_builtin_api_model() : load_api_model(opt.model, opt.mmap);
  if (!loaded.is_ok()) return fail(loaded.status().to_string());
  api::LoadedModel& model = **loaded;
  const ModelConfig& c = model.internal().config();
  std::fprintf(stderr, "ork: %s: %s, %d layers, n_embd %d, %d heads (%d KV), vocab %d, %.1f MiB of weights (%.2fs)\n",
               model.path().c_str(), c.arch->name, c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.n_vocab,
               static_cast<double>(model.weight_bytes()) / (1 << 20), seconds_since(t_load));

  std::vector<int32_t> prompt_ids = model.tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
  if (prompt_ids.empty()) prompt_ids.push_back(model.bos() >= 0 ? model.bos() : 0);
  const int n_ctx = opt.n_ctx > 0 ? opt.n_ctx : std::min(c.n_ctx_train, 4096);
  if (Status st = check_context(model.internal(), n_ctx, static_cast<int>(prompt_ids.size())); !st.is_ok()) {
    return fail(st.to_string());
  }
  if (static_cast<int>(prompt_ids.size()) >= n_ctx) {
    return fail(fmt::format("the prompt is {} tokens; the context (-c) holds {}", prompt_ids.size(), n_ctx));
  }

  const api::SamplerOptions sp = opt.sampling.resolve();
  SamplingCli::describe(sp);
  auto sampler = api::Sampler::create(sp);
  if (!sampler.is_ok()) return fail(sampler.status().to_string());

  NpuCli& npu_cli = opt.npu;
  if (Status st = npu_cli.start(); !st.is_ok()) return fail(st.to_string());
  if (Status st = npu_cli.check_model(model.internal()); !st.is_ok()) return fail(st.to_string());
  api::SessionOptions so;
  so.n_ctx = n_ctx;
  set_cache_types(so);
  auto session = api::Session::create(model, so);
  if (!session.is_ok()) return fail(session.status().to_string());
  Context& ctx = (*session)->context();
  npu_cli.attach(ctx);
  print(prompt);

  // The prompt's routing and expert use apart from generation's; the
  // profile covers generation alone.
  DispatchStats prefill_stats;
  Context::MoeStats prompt_stats;
  ExpertCacheStats prompt_cache;
  const ExpertCache* cache = model.internal().expert_cache();
  Context::Profile profile;
  api::GenerateOptions go;
  go.max_tokens = opt.n_predict;
  go.ignore_eos = opt.ignore_eos;
  go.stop = opt.stop;
  go.after_prompt = [&] {
    prefill_stats = ctx.dispatch_stats();
    ctx.reset_dispatch_stats();
    prompt_stats = ctx.moe_stats();
    if (cache != nullptr) prompt_cache = cache->stats();
    if (opt.profile) ctx.set_profile(&profile);
  };
  auto result = (*session)->generate(prompt_ids, **sampler, go, [](std::string_view text) {
    print(text);
    return true;
  });
  if (!result.is_ok()) return fail(result.status().to_string());
  print("\n");
  ctx.set_profile(nullptr);
  const api::GenerateResult& r = *result;
  // (An end of text counts as a generated token here, as it always has.)
  const int generated = r.generated_tokens + (r.stop_reason == "eos" ? 1 : 0);
  std::fprintf(stderr, "\nork: stopped: %s\n", stop_message(r.stop_reason));
  std::fprintf(stderr, "ork: prompt:     %5zu tokens in %8.2f ms (%8.2f tok/s)\n", prompt_ids.size(), r.prompt_seconds * 1e3,
               static_cast<double>(prompt_ids.size()) / r.prompt_seconds);
  std::fprintf(stderr, "ork: generation: %5d tokens in %8.2f ms (%8.2f tok/s)\n", generated, r.generate_seconds * 1e3,
               generated / r.generate_seconds);
  if (opt.stats) print_stats(model.internal(), ctx.moe_stats(), prompt_stats, generated);
  if (opt.stats && cache != nullptr) {
    print_expert_stats(stderr, "prompt", prompt_cache, prompt_ids.size());
    print_expert_stats(stderr, "generation", expert_stats_since(cache->stats(), prompt_cache),
                       static_cast<uint64_t>(std::max(0, generated - 1)));
  }
  if (opt.profile) print_profile(stderr, profile, 0.0);
  npu_cli.report(stderr, ctx.dispatch_stats(), prefill_stats, &model.internal().config());
  ctx.set_npu(nullptr);
  if (Status st = npu_cli.finish(); !st.is_ok()) return fail(st.to_string());
  return 0;
}

}  // namespace

namespace {

// --stats: weight bytes read per decoded token and, for a mixture of
// experts, each layer's expert usage over the whole run (prompt and
// generation) as counts and a bar per expert.
void print_stats(const Model& model, const Context::MoeStats& s, const Context::MoeStats& before_gen, int generated) {
  const uint64_t dense = model.dense_bytes_per_token();
  const int decoded = std::max(0, generated - 1);  // the last sampled token is not evaluated
  const double experts =
      decoded > 0 ? static_cast<double>(s.expert_bytes - before_gen.expert_bytes) / decoded : 0.0;
  std::fprintf(stderr, "ork: stats: weights read per decoded token: %.2f MB (dense %.2f MB + routed experts %.2f MB)\n",
               (static_cast<double>(dense) + experts) / 1e6, static_cast<double>(dense) / 1e6, experts / 1e6);
  if (s.hits.empty()) return;
  std::fprintf(stderr, "ork: stats: expert usage per layer over %llu tokens (token-expert pairs; bar = share of the layer's busiest)\n",
               static_cast<unsigned long long>(s.tokens));
  static const char* kBars[] = {" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
  for (int l = 0; l < s.n_layer; ++l) {
    const uint64_t* h = &s.hits[static_cast<size_t>(l) * s.n_expert];
    const uint64_t max = *std::max_element(h, h + s.n_expert);
    int unused = 0;
    std::string bars;
    for (int e = 0; e < s.n_expert; ++e) {
      unused += h[e] == 0;
      bars += kBars[max == 0 ? 0 : (h[e] * 8 + max - 1) / max];
    }
    std::fprintf(stderr, "  layer %3d |%s| max %llu, unused %d/%d\n", l, bars.c_str(), static_cast<unsigned long long>(max),
                 unused, s.n_expert);
    if (s.n_expert <= 16) {
      std::string counts;
      for (int e = 0; e < s.n_expert; ++e) counts += fmt::format(" e{}:{}", e, h[e]);
      std::fprintf(stderr, "           %s\n", counts.c_str());
    }
  }
}

}  // namespace

Runner add_run(CLI::App& app) {
  auto opt = std::make_shared<RunOptions>();
  app.add_option("-m,--model", opt->model, "Model file, GGUF or orkpack (default: the built-in stories260K)");
  app.add_option("-p,--prompt", opt->prompt, "Prompt text (default with no model: \"Once upon a time\")");
  app.add_option("-f,--file", opt->prompt_file, "Read the prompt from a file")->check(CLI::ExistingFile);
  app.add_option("-n,--n-predict", opt->n_predict, "Tokens to generate")->capture_default_str()->check(token_count());
  app.add_option("-c,--ctx-size", opt->n_ctx, "Context size in tokens (default: the model's, at most 4096)")
      ->check(token_count());
  opt->sampling.add_options(app);
  app.add_flag("--ignore-eos", opt->ignore_eos, "Keep generating past the end-of-text token");
  app.add_option("-r,--reverse-prompt,--stop", opt->stop, "Stop before this text (repeatable)");
  app.add_option("-t,--threads", opt->threads, "Threads (default: all cores)")->check(thread_count());
  add_load_flags(app, opt->mmap);
  add_cache_type_flags(app);
  opt->npu.add_options(app);
  app.add_flag("--stats", opt->stats, "After the run: weight bytes read per token and per-layer expert usage (MoE)");
  app.add_flag("--profile", opt->profile,
               "After the run: where generation's time went, per phase of the forward pass (time per token, the part "
               "in parallel loops, bytes read and their rate)");
  return [opt] { return run(*opt); };
}

}  // namespace ork::cli
