#include "load_model.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <string>

#include <unistd.h>

#include "core/memory.h"
#include "format/orkpack/orkpack.h"
#include "model/forward.h"
#include "model/model.h"

namespace ork::cli {

namespace {

// One command per process: the flags of add_load_flags, read by the loaders.
ConvertOptions g_convert;
std::string g_mem;             // --mem as given
uint64_t g_mem_bytes = 0;      // ... in bytes (0: none)
ExpertCacheOptions g_experts;  // --expert-policy
int g_n_ctx_hint = 0;          // the command's context, for the budget's KV share (0: the model's, at most 4096)
KvTypes g_kv_types;            // -ctk / -ctv

// --mem: "N" or "NG" GiB, "NM" MiB, "N%" of the memory available.
Result<uint64_t> parse_mem(const std::string& text) {
  if (text.empty()) return uint64_t{0};
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  double bytes = -1;
  if (used > 0 && v > 0 && std::isfinite(v)) {
    if (unit.empty() || unit == "G" || unit == "g" || unit == "GiB") bytes = v * (1ull << 30);
    if (unit == "M" || unit == "m" || unit == "MiB") bytes = v * (1ull << 20);
    if (unit == "%" && v <= 100) {
      const std::optional<uint64_t> available = available_memory_bytes();
      if (!available) return error(StatusCode::kInvalidArgument, "--mem {}: the memory available cannot be read here; give GiB", text);
      bytes = static_cast<double>(*available) * v / 100.0;
    }
  }
  if (bytes < (1 << 20) || bytes > 1e18) {
    return error(StatusCode::kInvalidArgument,
                 "--mem {}: expected a size such as 8 or 8G (GiB), 1500M (MiB), or 50% (of the memory available)", text);
  }
  return static_cast<uint64_t>(bytes);
}

uint64_t reserve_for(const ModelConfig& c) {
  const int train = c.n_ctx_train > 0 ? c.n_ctx_train : 4096;
  const int n_ctx = g_n_ctx_hint > 0 ? g_n_ctx_hint : std::min(train, 4096);
  return Context::memory_bytes(c, n_ctx, 512, true, g_kv_types);
}

}  // namespace

void add_cache_type_flags(CLI::App& app) {
  auto flag = [&](const char* names, KvType* type, const char* what) {
    app.add_option_function<std::string>(
           names, [type](const std::string& name) { *type = *kv_type_from_name(name); },
           fmt::format("The KV cache's {} type: f16, or q8_0 (int8 and a scale per 32 values: about half the bytes "
                       "a token reads at depth, attention scores on the integer dot products) (default: f16)",
                       what))
        ->check(CLI::IsMember({"f16", "q8_0"}));
  };
  flag("--cache-type-k", &g_kv_types.k, "keys' (also -ctk)");
  flag("--cache-type-v", &g_kv_types.v, "values' (also -ctv; q8_0 needs q8_0 keys)");
}

KvTypes cache_types() { return g_kv_types; }

void set_cache_types(api::SessionOptions& options) {
  options.cache_type_k = kv_type_name(g_kv_types.k);
  options.cache_type_v = kv_type_name(g_kv_types.v);
}

void add_load_flags(CLI::App& app, bool& mmap) {
  app.add_flag("--mmap", mmap,
               "Map the model file instead of reading it into memory on huge pages (starts faster and shares the "
               "page cache; decode is slower)");
  app.add_flag_callback(
      "--no-cache", [] { g_convert.use_cache = false; },
      "A quantized GGUF is converted for the fast kernels (a float one with --npu packed for the device) on every "
      "start, and nothing is kept (default: once, kept in the cache directory; see `ork cache`)");
  app.add_flag_callback(
      "--no-convert", [] { g_convert.convert = false; },
      "Run a quantized GGUF as it is, on the reference kernels (slow; for checking); a float one with --npu as it "
      "is, nothing on the NPU");
  app.add_option("--mem", g_mem,
                 "Memory the model may take, with its KV cache: 8 or 8G (GiB), 1500M (MiB), 50% (of what is available). "
                 "A Mixture-of-Experts orkpack that does not fit keeps its routed experts on disk and reads them on "
                 "demand into an expert cache of the rest (default: the model if it fits, else what is available less "
                 "a margin)");
  app.add_option_function<std::string>(
         "--expert-policy",
         [](const std::string& p) { g_experts.policy = p == "lfu" ? ExpertPolicy::kLfu : ExpertPolicy::kLru; },
         "With experts on disk, which cached expert gives way to a miss: lru (least recently used) or lfu (least often "
         "used)")
      ->check(CLI::IsMember({"lru", "lfu"}))
      ->default_str("lru");
}

void set_context_hint(int n_ctx) { g_n_ctx_hint = n_ctx; }

void set_convert_npu_profile(const std::string& profile) { g_convert.npu_profile = profile; }

Status check_load_flags() {
  ORK_ASSIGN_OR_RETURN(g_mem_bytes, parse_mem(g_mem));
  return Status::ok();
}

namespace {

// Loads what resolve_model() says - a file, or a conversion in memory
// (`adopt` takes the model made from it) - then removes a temporary
// conversion.
template <class Load, class Adopt>
auto load_resolved(const std::string& path, Load&& load, Adopt&& adopt) -> decltype(load(path)) {
  auto load_one = [&](ResolvedModel& r) -> decltype(load(path)) {
    if (!r.image) return load(r.path);
    ORK_ASSIGN_OR_RETURN(OrkpackFile pack, OrkpackFile::parse(std::move(*r.image)));
    ORK_ASSIGN_OR_RETURN(std::unique_ptr<Model> m, Model::load(std::move(pack)));
    return adopt(std::move(m));
  };
  auto resolved = resolve_model(path, g_convert);
  if (!resolved.is_ok()) return resolved.status();
  auto model = load_one(*resolved);
  if (!model.is_ok() && resolved->cached && model.status().code() == StatusCode::kCorrupt) {
    resolved = rebuild_damaged(path, *resolved, model.status(), g_convert);
    if (!resolved.is_ok()) return resolved.status();
    model = load_one(*resolved);
  }
  if (resolved->temporary) ::unlink(resolved->path.c_str());
  return model;
}

// A GGUF's matrices of block-quantized types (Q4_0, Q4_K, ...) run on the
// scalar reference kernels, which are there to be right, not fast: say so,
// and how to get the fast path, rather than let a user time them.
void note_reference_matrices(const Model& model) {
  if (model.orkpack() != nullptr) return;
  uint64_t bytes = 0, total = 0;
  std::string types;
  for (const GgufTensorInfo& t : model.gguf().tensors()) {
    if (t.dims.size() < 2) continue;
    total += t.bytes;
    if (t.type == GgmlType::kF32 || t.type == GgmlType::kF16 || t.type == GgmlType::kBF16) continue;
    bytes += t.bytes;
    const std::string name(ggml_type_name(t.type));
    if (types.find(name) == std::string::npos) types += (types.empty() ? "" : ", ") + name;
  }
  if (bytes == 0) return;
  std::fprintf(stderr,
               "ork: %.0f %% of %s's weights are %s, run as they are on the reference kernels (slow; "
               "without --no-convert they are converted for the fast ones)\n",
               100.0 * static_cast<double>(bytes) / static_cast<double>(total), model.path().c_str(), types.c_str());
}

// A model whose experts stay on disk: say so, with the cache's size.
void note_expert_cache(const Model& model) {
  const ExpertCache* cache = model.expert_cache();
  if (cache == nullptr) return;
  const ExpertCacheStats s = cache->stats();
  std::fprintf(stderr,
               "ork: %s: routed experts read from disk on demand into an expert cache of %llu experts (%.1f MiB, %s, "
               "%s reads)%s\n",
               model.path().c_str(), static_cast<unsigned long long>(s.slots),
               static_cast<double>(s.slots * s.slot_bytes) / (1 << 20), expert_policy_name(g_experts.policy),
               s.direct ? "direct" : "buffered", g_mem_bytes > 0 ? "" : " - it does not fit in the memory available");
}

}  // namespace

Result<std::unique_ptr<Model>> load_model(const std::string& path, bool mmap) {
  ORK_RETURN_IF_ERROR(check_load_flags());
  auto model = load_resolved(
      path,
      [&](const std::string& p) {
        return Model::load_within_budget(p, mmap ? MappedFile::Residency::kMapped : MappedFile::Residency::kResident,
                                         g_mem_bytes, reserve_for, g_experts);
      },
      [](std::unique_ptr<Model> m) -> Result<std::unique_ptr<Model>> { return m; });
  if (model.is_ok() && !mmap && !(*model)->resident()) {
    std::fprintf(stderr, "ork: %s does not fit in the memory available; mapped instead (decode is slower)\n",
                 path.c_str());
  }
  if (model.is_ok()) note_expert_cache(**model);
  if (model.is_ok()) note_reference_matrices(**model);
  return model;
}

Result<std::unique_ptr<api::LoadedModel>> load_api_model(const std::string& path, bool mmap) {
  ORK_RETURN_IF_ERROR(check_load_flags());
  api::ModelOptions o;
  o.mmap = mmap;
  o.mem_bytes = g_mem_bytes;
  o.expert_policy = expert_policy_name(g_experts.policy);
  auto model = load_resolved(
      path, [&](const std::string& p) { return api::LoadedModel::load(p, o); },
      [](std::unique_ptr<Model> m) { return api::LoadedModel::adopt(std::move(m)); });
  if (model.is_ok() && !mmap && !(*model)->resident()) {
    std::fprintf(stderr, "ork: %s does not fit in the memory available; mapped instead (decode is slower)\n",
                 path.c_str());
  }
  if (model.is_ok()) note_expert_cache((*model)->internal());
  if (model.is_ok()) note_reference_matrices((*model)->internal());
  return model;
}

Status set_chat_template_option(api::LoadedModel& model, const std::string& option) {
  if (option.empty()) return Status::ok();
  std::string source = "chatml";
  if (option != "chatml") {
    std::ifstream in(option, std::ios::binary);
    if (!in) {
      return error(StatusCode::kInvalidArgument, "--chat-template {}: not a readable file (the built-in name is 'chatml')",
                   option);
    }
    source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const Status st = model.set_chat_template(source, option);
  return st.is_ok() ? st : error(st.code(), "{}", st.to_string());
}

Status check_context(const Model& model, int n_ctx, int n_batch, bool fast_kernels, int n_seq) {
  const ModelConfig& c = model.config();
  if (n_ctx > c.n_ctx_train) {
    std::fprintf(stderr,
                 "ork: warning: a context of %d tokens is past the %d the model was trained on; text beyond it is "
                 "likely to degrade\n",
                 n_ctx, c.n_ctx_train);
  }
  if (fast_kernels) ORK_RETURN_IF_ERROR(Context::check_kv_types(c, g_kv_types));
  const uint64_t need = Context::memory_bytes(c, n_ctx, n_batch, fast_kernels, g_kv_types) * static_cast<uint64_t>(n_seq);
  const std::optional<uint64_t> available = available_memory_bytes();
  if (available && need > *available) {
    return error(StatusCode::kResourceExhausted,
                 "-c {}{}: the KV cache and buffers need {:.1f} MiB, but only {:.1f} MiB of memory is available; use a "
                 "smaller -c",
                 n_ctx * n_seq, n_seq > 1 ? fmt::format(" ({} slots of {})", n_seq, n_ctx) : "", static_cast<double>(need) / (1 << 20), static_cast<double>(*available) / (1 << 20));
  }
  return Status::ok();
}

}  // namespace ork::cli
