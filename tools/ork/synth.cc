// ork synth: write a synthetic model with random weights.
#include <chrono>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "commands.h"
#include "core/output_file.h"
#include "model/synth.h"

namespace ork::cli {
namespace {

struct SynthCliOptions {
  SynthOptions synth;
  std::string preset;
  std::string type = "F32";
  std::string output;
  bool untied = false;
};

int synth(SynthCliOptions opt, const CLI::App& app) {
  SynthOptions o = opt.synth;
  if (!opt.preset.empty()) {
    if (!synth_preset(opt.preset, &o)) {
      return fail(fmt::format("unknown preset '{}' (known: {})", opt.preset, synth_preset_names()));
    }
    // Shape flags given explicitly override the preset.
    auto given = [&](const char* name) { return app.count(name) > 0; };
    if (given("--n-embd")) o.n_embd = opt.synth.n_embd;
    if (given("--layers")) o.n_layer = opt.synth.n_layer;
    if (given("--heads")) o.n_head = opt.synth.n_head;
    if (given("--kv-heads")) o.n_head_kv = opt.synth.n_head_kv;
    if (given("--head-dim")) o.head_dim = opt.synth.head_dim;
    if (given("--n-ff")) o.n_ff = opt.synth.n_ff;
    if (given("--vocab")) o.n_vocab = opt.synth.n_vocab;
    if (given("--ctx")) o.n_ctx = opt.synth.n_ctx;
    if (given("--experts")) o.n_expert = opt.synth.n_expert;
    if (given("--experts-used")) o.n_expert_used = opt.synth.n_expert_used;
    if (given("--expert-ff")) o.n_ff_exp = opt.synth.n_ff_exp;
    if (given("--shared-expert-ff")) o.n_ff_shexp = opt.synth.n_ff_shexp;
    if (given("--attention-layers")) o.attention_layers = opt.synth.attention_layers;
    if (given("--dense-layers")) o.n_dense_leading = opt.synth.n_dense_leading;
    if (given("--attention-interval")) o.full_attention_interval = opt.synth.full_attention_interval;
    if (given("--ssm-k-heads")) o.ssm_k_heads = opt.synth.ssm_k_heads;
    if (given("--ssm-v-heads")) o.ssm_v_heads = opt.synth.ssm_v_heads;
    if (given("--ssm-head-dim")) o.ssm_k_dim = o.ssm_v_dim = opt.synth.ssm_k_dim;
    if (given("--arch") || o.n_expert == 0) o.arch = opt.synth.arch;  // MoE presets name their architecture
  } else {
    o.arch = opt.synth.arch;
  }
  if (opt.preset.empty()) o.ssm_v_dim = o.ssm_k_dim;  // one --ssm-head-dim for both
  o.seed = opt.synth.seed;
  if (opt.untied) o.tied = false;
  // OLMoE is multi-head (llama.cpp reads it so): as many KV heads as heads
  // unless asked otherwise (which synth then refuses, saying why).
  if (o.arch == "olmoe" && app.count("--kv-heads") == 0) o.n_head_kv = o.n_head;
  const auto type = ggml_type_from_name(opt.type);
  if (!type) return fail(fmt::format("unknown type '{}'", opt.type));
  o.type = *type;

  if (Status st = check_output_path(opt.output, {}); !st.is_ok()) return fail(st.to_string());
  GgufWriter writer;
  GgufWriter::DataFn data_fn;
  Status s = synth_model(o, &writer, &data_fn);
  if (!s.is_ok()) return fail(s.message());
  const uint64_t params = synth_param_count(o);
  std::fprintf(stderr, "ork: writing %s: %s, %llu parameters, %s, random weights (seed %llu)\n", opt.output.c_str(),
               o.arch.c_str(), static_cast<unsigned long long>(params), opt.type.c_str(),
               static_cast<unsigned long long>(o.seed));
  const auto t0 = std::chrono::steady_clock::now();
  size_t written = 0;
  const size_t n_tensors = writer.tensor_count();
  const bool tty = isatty(fileno(stderr));
  auto with_progress = [&](size_t index, std::vector<uint8_t>& out) {
    data_fn(index, out);
    ++written;
    if (tty) std::fprintf(stderr, "\r  tensors %zu/%zu", written, std::max(written, n_tensors));
  };
  s = writer.write_file(opt.output, with_progress);
  if (tty) std::fprintf(stderr, "\n");
  if (!s.is_ok()) return fail(s.to_string());
  std::fprintf(stderr, "ork: wrote %s in %.1fs\n", opt.output.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

}  // namespace

Runner add_synth(CLI::App& app) {
  auto opt = std::make_shared<SynthCliOptions>();
  app.add_option("--arch", opt->synth.arch, "Architecture: llama, qwen2, qwen3, qwen2moe, qwen3moe, olmoe, lfm2, lfm2moe, qwen35, qwen35moe")
      ->capture_default_str();
  app.add_option("--preset", opt->preset, "Shape preset: " + synth_preset_names() + " (shape flags override it)");
  app.add_option("--n-embd", opt->synth.n_embd, "Embedding width")->capture_default_str();
  app.add_option("--layers", opt->synth.n_layer, "Transformer blocks")->capture_default_str();
  app.add_option("--heads", opt->synth.n_head, "Attention heads")->capture_default_str();
  app.add_option("--kv-heads", opt->synth.n_head_kv, "KV heads (GQA)")->capture_default_str();
  app.add_option("--head-dim", opt->synth.head_dim, "Head dimension (0: n_embd / heads)")->capture_default_str();
  app.add_option("--n-ff", opt->synth.n_ff, "Feed-forward width")->capture_default_str();
  app.add_option("--vocab", opt->synth.n_vocab, "Vocabulary size (>= 260)")->capture_default_str();
  app.add_option("--ctx", opt->synth.n_ctx, "Trained context length written to the metadata")->capture_default_str();
  app.add_option("--experts", opt->synth.n_expert, "Experts per layer (MoE; llama with experts is Mixtral)")
      ->capture_default_str();
  app.add_option("--experts-used", opt->synth.n_expert_used, "Experts each token is routed to")->capture_default_str();
  app.add_option("--expert-ff", opt->synth.n_ff_exp, "Each expert's FFN width, qwen2moe and qwen3moe (0: --n-ff; mixtral's and olmoe's are --n-ff)")->capture_default_str();
  app.add_option("--shared-expert-ff", opt->synth.n_ff_shexp, "qwen2moe's shared expert FFN width (0: --n-ff)")
      ->capture_default_str();
  app.add_option("--attention-layers", opt->synth.attention_layers,
                 "lfm2, lfm2moe: the layers that attend, e.g. 2,6,10 (the others are short convolutions; default: "
                 "every third from layer 2)")
      ->delimiter(',');
  app.add_option("--dense-layers", opt->synth.n_dense_leading,
                 "lfm2moe: dense FFN layers before the experts (leading_dense_block_count)")
      ->capture_default_str();
  app.add_option("--attention-interval", opt->synth.full_attention_interval,
                 "qwen35, qwen35moe: every N-th layer attends, the others are gated DeltaNets")
      ->capture_default_str();
  app.add_option("--ssm-k-heads", opt->synth.ssm_k_heads, "qwen35: DeltaNet q/k heads")->capture_default_str();
  app.add_option("--ssm-v-heads", opt->synth.ssm_v_heads, "qwen35: DeltaNet v heads (a multiple of --ssm-k-heads)")
      ->capture_default_str();
  app.add_option("--ssm-head-dim", opt->synth.ssm_k_dim, "qwen35: DeltaNet head dimension (q, k and v)")
      ->capture_default_str();
  app.add_flag("--untied", opt->untied, "Write a separate output.weight instead of tying it to token_embd (qwen2moe and olmoe always have one: llama.cpp needs it)");
  app.add_option("--type", opt->type, "Matrix type: F32, F16, BF16, Q8_0, Q4_0")->capture_default_str();
  app.add_option("--seed", opt->synth.seed, "Random seed of the weights")->capture_default_str();
  app.add_option("-o,--output", opt->output, "Output GGUF path")->required();
  CLI::App* self = &app;
  return [opt, self] { return synth(*opt, *self); };
}

}  // namespace ork::cli
