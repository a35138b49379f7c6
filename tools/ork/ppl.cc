// ork ppl: perplexity of a model on a text and, against a reference (the
// unquantized model, or its scores saved earlier), mean KL divergence,
// top-1 agreement and RMS delta-p — llama.cpp's perplexity measures.
#include <cstdio>
#include <cstring>
#include <fstream>

#include "commands.h"
#include "npu_cli.h"
#include "core/output_file.h"
#include "expert_report.h"
#include "load_model.h"
#include "model/perplexity.h"
#include "text_input.h"

namespace ork::cli {
namespace {

struct PplCliOptions {
  bool mmap = false;
  std::string model, text, ref, kl_base, save_kl_base;
  int n_ctx = 128;
  int chunks = 0;
  int threads = 0;
  bool json = false;
  bool decode = false;
  bool i8s_high_only = false;
  NpuCli npu;
  bool reference_kernels = false;
};

constexpr char kKlMagic[8] = {'O', 'R', 'K', 'K', 'L', 'B', '0', '1'};

Status save_base(const std::string& path, const std::vector<WindowScores>& windows) {
  ORK_ASSIGN_OR_RETURN(OutputFile out, OutputFile::create(path));
  const uint32_t head[3] = {static_cast<uint32_t>(windows.size()), static_cast<uint32_t>(windows[0].size()),
                            static_cast<uint32_t>(windows[0][0].size())};
  ORK_RETURN_IF_ERROR(out.write(kKlMagic, 8));
  ORK_RETURN_IF_ERROR(out.write(head, sizeof head));
  for (const auto& w : windows) {
    for (const auto& lp : w) ORK_RETURN_IF_ERROR(out.write(lp.data(), lp.size() * 4));
  }
  return out.commit();
}

Result<std::vector<WindowScores>> load_base(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  uint32_t head[3] = {};
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(head), sizeof head);
  if (!in || std::memcmp(magic, kKlMagic, 8) != 0) {
    return error(StatusCode::kCorrupt, "{}: not an ork KL base (saved by ork ppl --save-kl-base)", path);
  }
  const uint64_t total = static_cast<uint64_t>(head[0]) * head[1] * head[2];
  if (head[0] == 0 || head[1] == 0 || head[2] == 0 || total > (1ull << 32)) {
    return error(StatusCode::kCorrupt, "{}: implausible KL base shape {} x {} x {}", path, head[0], head[1], head[2]);
  }
  std::vector<WindowScores> windows(head[0], WindowScores(head[1], std::vector<float>(head[2])));
  for (auto& w : windows) {
    for (auto& lp : w) in.read(reinterpret_cast<char*>(lp.data()), static_cast<long>(lp.size() * 4));
  }
  if (!in) return error(StatusCode::kCorrupt, "{}: truncated KL base", path);
  return windows;
}

int ppl(PplCliOptions& c) {
  if (!c.save_kl_base.empty()) {
    const Status st = check_output_path(c.save_kl_base, {c.model, c.text, c.ref, c.kl_base}, "--save-kl-base");
    if (!st.is_ok()) return fail(st.to_string());
  }
  set_context_hint(c.n_ctx);
  auto model = load_model(c.model, c.mmap);
  if (!model.is_ok()) return fail(model.status().to_string());
  if (Status st = c.npu.start(); !st.is_ok()) return fail(st.to_string());
  if (Status st = c.npu.check_model(**model); !st.is_ok()) return fail(st.to_string());
  std::unique_ptr<Model> ref;
  if (!c.ref.empty()) {
    // The reference is scored as it is: --npu packs the model, never it.
    set_convert_npu_profile({});
    auto r = load_model(c.ref, c.mmap);
    if (!r.is_ok()) return fail(r.status().to_string());
    ref = std::move(r).value();
  }
  std::optional<std::vector<WindowScores>> base;
  if (!c.kl_base.empty()) {
    auto b = load_base(c.kl_base);
    if (!b.is_ok()) return fail(b.status().to_string());
    base = std::move(b).value();
  }
  auto tokens = tokenize_file(**model, c.text);
  if (!tokens.is_ok()) return fail(tokens.status().to_string());
  if (tokens->chars_dropped > 0) {
    std::fprintf(stderr, "ork: the vocabulary has no byte tokens: deleted %zu of %zu characters it cannot spell (%.2f %%)\n",
                 tokens->chars_dropped, tokens->chars_total,
                 100.0 * static_cast<double>(tokens->chars_dropped) / static_cast<double>(tokens->chars_total));
  }
  PerplexityOptions o;
  o.n_ctx = c.n_ctx;
  o.max_chunks = c.chunks;
  o.threads = c.threads;
  o.decode = c.decode;
  DispatchStats routed;
  o.dispatch_stats = &routed;
  const NpuCli& npu = c.npu;
  if (Status st = Context::check_kv_types((*model)->config(), cache_types()); !st.is_ok() && !c.reference_kernels) {
    return fail(st.to_string());
  }
  o.setup = [&](Context& ctx) {
    if (!c.reference_kernels) (void)ctx.set_kv_types(cache_types());  // checked above
    npu.attach(ctx);
    ctx.set_i8s_high_only(c.i8s_high_only);
  };
  o.reference_kernels = c.reference_kernels;
  std::vector<WindowScores> saved;
  auto stats = measure_quality(**model, tokens->ids, tokens->bos, o, ref.get(), base ? &*base : nullptr,
                               c.save_kl_base.empty() ? nullptr : &saved,
                               [](int done, int total) { progress_bar("ppl", done, total); });
  if (!stats.is_ok()) return fail(stats.status().to_string());
  if (!c.save_kl_base.empty()) {
    const Status s = save_base(c.save_kl_base, saved);
    if (!s.is_ok()) return fail(s.to_string());
  }
  const QualityStats& s = *stats;
  c.npu.report(stderr, routed, routed);
  const bool has_npu = c.npu.engine() != nullptr;
  if (Status st = c.npu.finish(); !st.is_ok()) return fail(st.to_string());
  if (c.json) {
    std::printf("{\"model\": \"%s\", \"text\": \"%s\", \"ctx\": %d, \"tokens\": %llu, \"ppl\": %.6f, \"ppl_err\": %.6f",
                c.model.c_str(), c.text.c_str(), c.n_ctx, static_cast<unsigned long long>(s.tokens), s.ppl.value,
                s.ppl.err);
    if (s.has_base) {
      std::printf(", \"base_ppl\": %.6f, \"kld\": %.8f, \"kld_err\": %.8f, \"top1\": %.6f, \"top1_err\": %.6f, "
                  "\"rms_dp\": %.6f, \"rms_dp_err\": %.6f",
                  s.base_ppl.value, s.kld.value, s.kld.err, s.top1.value, s.top1.err, s.rms_dp.value, s.rms_dp.err);
    }
    if (const ExpertCache* cache = (*model)->expert_cache()) {
      std::printf(", \"experts\": %s", expert_stats_json(cache->stats(), 0).c_str());
    }
    if (has_npu) {
      std::printf(", \"overlay_hits\": %llu, \"overlay_misses\": %llu, \"overlay_hit_rate\": %.6f",
                  static_cast<unsigned long long>(routed.overlay_hits), static_cast<unsigned long long>(routed.overlay_misses),
                  routed.hit_rate());
      std::printf(", \"overlay_roles\": %s", roles_json(routed).c_str());
    }
    std::printf("}\n");
    return 0;
  }
  std::printf("%s on %s, context %d, %llu scored tokens\n", c.model.c_str(), c.text.c_str(), c.n_ctx,
              static_cast<unsigned long long>(s.tokens));
  std::printf("PPL           %10.4f +/- %.4f\n", s.ppl.value, s.ppl.err);
  if (s.has_base) {
    std::printf("PPL (base)    %10.4f +/- %.4f\n", s.base_ppl.value, s.base_ppl.err);
    std::printf("Mean KLD      %10.6f +/- %.6f\n", s.kld.value, s.kld.err);
    std::printf("Same top-1    %9.3f %% +/- %.3f %%\n", 100 * s.top1.value, 100 * s.top1.err);
    std::printf("RMS delta-p   %9.3f %% +/- %.3f %%\n", 100 * s.rms_dp.value, 100 * s.rms_dp.err);
  }
  if (const ExpertCache* cache = (*model)->expert_cache()) {
    const ExpertCacheStats e = cache->stats();
    std::printf("Experts       hit rate %.1f %% (%llu of %llu asked), %.1f MB read from disk, cache of %llu\n",
                100.0 * e.hit_rate(), static_cast<unsigned long long>(e.hits), static_cast<unsigned long long>(e.requests),
                static_cast<double>(e.bytes_read) / 1e6, static_cast<unsigned long long>(e.slots));
  }
  return 0;
}

}  // namespace

Runner add_ppl(CLI::App& app) {
  auto c = std::make_shared<PplCliOptions>();
  app.add_option("-m,--model", c->model, "Model (GGUF or orkpack)")->required()->check(CLI::ExistingFile);
  app.add_option("-f,--file", c->text, "Text to score")->required()->check(CLI::ExistingFile);
  app.add_option("-c,--ctx-size", c->n_ctx, "Window in tokens; the second half of each is scored")
      ->capture_default_str()
      ->check(CLI::Range(4, 1 << 20));
  app.add_option("--chunks", c->chunks, "Score at most this many windows (0 = all)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--ref", c->ref, "Reference model for KL divergence (e.g. the f32 GGUF)")->check(CLI::ExistingFile);
  app.add_option("--kl-base", c->kl_base, "Reference scores saved by --save-kl-base")->check(CLI::ExistingFile);
  app.add_option("--save-kl-base", c->save_kl_base, "Save this model's scores as a KL base");
  app.add_option("-t,--threads", c->threads, "Windows scored side by side (default: all cores; the result does not depend on it)")
      ->check(thread_count());
  app.add_flag("--json", c->json, "Print one JSON object");
  app.add_flag("--decode", c->decode,
               "Score as generation runs: each window's first half as one batch, then one token at a time (the path "
               "the NPU's decode overlay takes)");
  app.add_flag("--i8s-high-only", c->i8s_high_only,
               "Read i8s tensors from their high plane alone (int4): the CPU's share of the overlay");
  c->npu.add_options(app);
  add_load_flags(app, c->mmap);
  add_cache_type_flags(app);
  app.add_flag("--ref-kernels", c->reference_kernels,
               "Score with the scalar reference kernels (f32 activations): the weights' quality alone");
  return [c] { return ppl(*c); };
}

}  // namespace ork::cli
