#include "model/synth.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <thread>

#include "core/half.h"
#include "core/thread_pool.h"
#include "format/gguf/dequant.h"
#include "model/config.h"

namespace ork {

bool synth_preset(const std::string& name, SynthOptions* o) {
  SynthOptions s;
  if (name == "tiny") {
    s.n_embd = 128, s.n_layer = 4, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 384, s.n_vocab = 512, s.n_ctx = 1024;
  } else if (name == "stories") {
    s.n_embd = 288, s.n_layer = 6, s.n_head = 6, s.n_head_kv = 6, s.n_ff = 768, s.n_vocab = 32000, s.n_ctx = 256;
  } else if (name == "llama-1b") {
    s.n_embd = 2048, s.n_layer = 16, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 8192, s.n_vocab = 32000;
    s.n_ctx = 4096, s.tied = false;
  } else if (name == "qwen3moe-30b-a3b") {
    s.arch = "qwen3moe";
    s.n_embd = 2048, s.n_layer = 48, s.n_head = 32, s.n_head_kv = 4, s.head_dim = 128, s.n_ff = 6144;
    s.n_expert = 128, s.n_expert_used = 8, s.n_ff_exp = 768, s.n_vocab = 32000, s.n_ctx = 4096, s.tied = false;
  } else if (name == "lfm2-8b-a1b") {
    s.arch = "lfm2moe";
    s.n_embd = 2048, s.n_layer = 24, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 7168;
    s.attention_layers = {2, 6, 10, 14, 18, 21};
    s.n_dense_leading = 2;
    s.n_expert = 32, s.n_expert_used = 4, s.n_ff_exp = 1792, s.n_vocab = 65536, s.n_ctx = 4096;
  } else if (name == "qwen3.6-35b-a3b") {
    s.arch = "qwen35moe";
    s.n_embd = 2048, s.n_layer = 40, s.n_head = 16, s.n_head_kv = 2, s.head_dim = 256, s.n_ff = 512;
    s.full_attention_interval = 4, s.ssm_conv_kernel = 4;
    s.ssm_k_heads = 16, s.ssm_v_heads = 32, s.ssm_k_dim = 128, s.ssm_v_dim = 128;
    s.n_expert = 256, s.n_expert_used = 8, s.n_ff_exp = 512, s.n_ff_shexp = 512;
    s.n_vocab = 248320, s.n_ctx = 4096, s.tied = false;
  } else {
    return false;
  }
  if (s.n_expert == 0) s.arch = o->arch;
  s.type = o->type;
  s.seed = o->seed;
  *o = s;
  return true;
}

std::string synth_preset_names() { return "tiny, stories, llama-1b, qwen3moe-30b-a3b, lfm2-8b-a1b, qwen3.6-35b-a3b"; }

namespace {

// splitmix64: a small, fast, well-mixed generator; one stream per tensor
// so data can be generated in any order and still be deterministic.
struct Rng {
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // the state's step a draw
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += kGamma);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  // Box-Muller; one value per call keeps it simple.
  float normal() {
    const double u1 = uniform(), u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

// A vocabulary of: <unk> <s> </s>, the 256 byte tokens, then "▁" and
// letter strings with and without the "▁" word prefix, shortest first, so
// that every multi-letter token can be reached by pairwise merges.
void synth_vocab(int n_vocab, std::vector<std::string>* tokens, std::vector<double>* scores,
                 std::vector<int64_t>* types) {
  tokens->clear();
  *tokens = {"<unk>", "<s>", "</s>"};
  *types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens->push_back(fmt::format("<0x{:02X}>", b));
    types->push_back(6);
  }
  const std::string space = "\xE2\x96\x81";
  std::vector<std::string> pieces = {space};
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
  std::vector<std::string> level = {""};
  while (static_cast<int>(tokens->size() + pieces.size()) < n_vocab * 2 && level.front().size() < 4) {
    std::vector<std::string> next;
    for (const auto& prefix : level) {
      for (char c : letters) next.push_back(prefix + c);
    }
    for (const auto& s : next) {
      pieces.push_back(s);
      pieces.push_back(space + s);
    }
    level = std::move(next);
  }
  for (size_t i = 0; static_cast<int>(tokens->size()) < n_vocab; ++i) {
    if (i < pieces.size()) {
      tokens->push_back(pieces[i]);
    } else {
      tokens->push_back(fmt::format("[PAD{}]", tokens->size()));  // vocabularies larger than the pieces
    }
    types->push_back(i < pieces.size() ? 1 : 5);
  }
  scores->assign(tokens->size(), 0.0);
  // Later (longer) pieces score lower, so merges prefer common short pieces.
  for (size_t i = 259; i < tokens->size(); ++i) (*scores)[i] = -static_cast<double>(i - 259);
}

struct TensorPlan {
  std::string name;
  std::vector<uint64_t> dims;
  GgmlType type;
  enum Kind { kMatrix, kNorm, kBias, kConv, kDecayA } kind;
};

// Each expert's width: its own only where the family has the key (the
// Qwen MoEs); mixtral's and olmoe's are n_ff.
int expert_ff(const SynthOptions& o, const ArchSpec* arch) {
  return arch != nullptr && arch->expert_ff_key && o.n_ff_exp > 0 ? o.n_ff_exp : o.n_ff;
}

// Tied unless asked otherwise or the family needs its own output matrix.
bool tied_output(const SynthOptions& o, const ArchSpec* arch) {
  return o.tied && (arch == nullptr || !arch->output_required);
}

// Whether layer l attends (every layer, unless the family is hybrid).
bool attends(const SynthOptions& o, const ArchSpec* arch, int l) {
  if (arch->layers == LayerPattern::kFullAttentionInterval) return (l + 1) % o.full_attention_interval == 0;
  if (arch->layers != LayerPattern::kKvHeadsZeroConv) return true;
  if (o.attention_layers.empty()) return l % 3 == 2;
  return std::find(o.attention_layers.begin(), o.attention_layers.end(), l) != o.attention_layers.end();
}

// Every tensor of the model, in file order.
std::vector<TensorPlan> plan_tensors(const SynthOptions& o, const ArchSpec* arch, int hd) {
  std::vector<TensorPlan> plans;
  const bool moe = arch->requires_experts || o.n_expert > 0;
  const int ff_exp = expert_ff(o, arch);
  const bool tied = tied_output(o, arch);
  const int ff_sh = o.n_ff_shexp > 0 ? o.n_ff_shexp : o.n_ff;
  const auto E = static_cast<uint64_t>(o.n_embd), F = static_cast<uint64_t>(o.n_ff), V = static_cast<uint64_t>(o.n_vocab);
  const auto Q = static_cast<uint64_t>(o.n_head * hd), KV = static_cast<uint64_t>(o.n_head_kv * hd);
  auto matrix = [&](const std::string& n, uint64_t cols, uint64_t rows) {
    plans.push_back({n, {cols, rows}, o.type, TensorPlan::kMatrix});
  };
  auto vec = [&](const std::string& n, uint64_t len, TensorPlan::Kind kind) {
    plans.push_back({n, {len}, GgmlType::kF32, kind});
  };
  matrix("token_embd.weight", E, V);
  for (int l = 0; l < o.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vec(p + "attn_norm.weight", E, TensorPlan::kNorm);
    if (!attends(o, arch, l) && arch->layers == LayerPattern::kFullAttentionInterval) {
      const auto NV = static_cast<uint64_t>(o.ssm_v_heads), inner = NV * static_cast<uint64_t>(o.ssm_v_dim);
      const uint64_t qkv = 2 * static_cast<uint64_t>(o.ssm_k_heads * o.ssm_k_dim) + inner;
      matrix(p + "attn_qkv.weight", E, qkv);
      matrix(p + "attn_gate.weight", E, inner);
      matrix(p + "ssm_beta.weight", E, NV);
      matrix(p + "ssm_alpha.weight", E, NV);
      plans.push_back({p + "ssm_conv1d.weight", {static_cast<uint64_t>(o.ssm_conv_kernel), qkv}, GgmlType::kF32,
                       TensorPlan::kConv});
      vec(p + "ssm_dt.bias", NV, TensorPlan::kBias);
      vec(p + "ssm_a", NV, TensorPlan::kDecayA);
      vec(p + "ssm_norm.weight", static_cast<uint64_t>(o.ssm_v_dim), TensorPlan::kNorm);
      matrix(p + "ssm_out.weight", inner, E);
    } else if (!attends(o, arch, l)) {
      matrix(p + "shortconv.in_proj.weight", E, 3 * E);
      // The kernel stays F32 (llama.cpp's too: 3 taps are no block).
      plans.push_back({p + "shortconv.conv.weight", {static_cast<uint64_t>(o.conv_kernel), E}, GgmlType::kF32,
                       TensorPlan::kConv});
      matrix(p + "shortconv.out_proj.weight", E, E);
    } else {
      matrix(p + "attn_q.weight", E, arch->gated_attention ? 2 * Q : Q);
      matrix(p + "attn_k.weight", E, KV);
      matrix(p + "attn_v.weight", E, KV);
      if (arch->qkv_bias) {
        vec(p + "attn_q.bias", Q, TensorPlan::kBias);
        vec(p + "attn_k.bias", KV, TensorPlan::kBias);
        vec(p + "attn_v.bias", KV, TensorPlan::kBias);
      }
      if (arch->qk_norm != QkNorm::kNone) {
        const bool whole = arch->qk_norm == QkNorm::kWhole;
        vec(p + "attn_q_norm.weight", whole ? Q : static_cast<uint64_t>(hd), TensorPlan::kNorm);
        vec(p + "attn_k_norm.weight", whole ? KV : static_cast<uint64_t>(hd), TensorPlan::kNorm);
      }
      matrix(p + "attn_output.weight", Q, E);
    }
    vec(p + arch->ffn_norm, E, TensorPlan::kNorm);
    if (!moe || l < o.n_dense_leading) {
      matrix(p + "ffn_gate.weight", E, F);
      matrix(p + "ffn_up.weight", E, F);
      matrix(p + "ffn_down.weight", F, E);
      continue;
    }
    // The router stays F32 whatever --type says: the families route in f32.
    const auto X = static_cast<uint64_t>(o.n_expert), FX = static_cast<uint64_t>(ff_exp);
    plans.push_back({p + "ffn_gate_inp.weight", {E, X}, GgmlType::kF32, TensorPlan::kMatrix});
    plans.push_back({p + "ffn_gate_exps.weight", {E, FX, X}, o.type, TensorPlan::kMatrix});
    plans.push_back({p + "ffn_up_exps.weight", {E, FX, X}, o.type, TensorPlan::kMatrix});
    plans.push_back({p + "ffn_down_exps.weight", {FX, E, X}, o.type, TensorPlan::kMatrix});
    if (arch->layers == LayerPattern::kKvHeadsZeroConv) vec(p + "exp_probs_b.bias", X, TensorPlan::kBias);
    if (arch->shared_expert) {
      const auto FS = static_cast<uint64_t>(ff_sh);
      vec(p + "ffn_gate_inp_shexp.weight", E, TensorPlan::kBias);
      matrix(p + "ffn_gate_shexp.weight", E, FS);
      matrix(p + "ffn_up_shexp.weight", E, FS);
      matrix(p + "ffn_down_shexp.weight", FS, E);
    }
  }
  vec(arch->output_norm, E, TensorPlan::kNorm);
  if (!tied) matrix("output.weight", E, V);
  return plans;
}

}  // namespace

uint64_t synth_param_count(const SynthOptions& o) {
  const ArchSpec* arch = find_arch(o.arch);
  if (arch == nullptr || o.n_head <= 0) return 0;
  const int hd = o.head_dim > 0 ? o.head_dim : o.n_embd / o.n_head;
  uint64_t total = 0;
  for (const TensorPlan& t : plan_tensors(o, arch, hd)) {
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    total += n;
  }
  return total;
}

Status synth_model(const SynthOptions& o, GgufWriter* w, GgufWriter::DataFn* data_fn) {
  const ArchSpec* arch = find_arch(o.arch);
  if (arch == nullptr) {
    return error(StatusCode::kInvalidArgument, "synth: architecture '{}' is not supported ({})", o.arch,
                 supported_arch_names());
  }
  const auto info = ggml_type_info(static_cast<uint32_t>(o.type));
  if (!info || !can_quantize(o.type)) {
    return error(StatusCode::kInvalidArgument, "synth: weight type {} is not supported (F32, F16, BF16, Q8_0, Q4_0)",
                 ggml_type_name(o.type));
  }
  auto positive = [](int v, const char* what) {
    return v > 0 ? Status::ok() : error(StatusCode::kInvalidArgument, "synth: {} must be positive (got {})", what, v);
  };
  ORK_RETURN_IF_ERROR(positive(o.n_embd, "n_embd"));
  ORK_RETURN_IF_ERROR(positive(o.n_layer, "n_layer"));
  ORK_RETURN_IF_ERROR(positive(o.n_head, "n_head"));
  ORK_RETURN_IF_ERROR(positive(o.n_head_kv, "n_head_kv"));
  ORK_RETURN_IF_ERROR(positive(o.n_ff, "n_ff"));
  ORK_RETURN_IF_ERROR(positive(o.n_ctx, "n_ctx"));
  if (o.n_vocab < 260) return error(StatusCode::kInvalidArgument, "synth: n_vocab must be at least 260 (got {})", o.n_vocab);
  if (o.n_head % o.n_head_kv != 0) {
    return error(StatusCode::kInvalidArgument, "synth: n_head {} is not a multiple of n_head_kv {}", o.n_head,
                 o.n_head_kv);
  }
  const int hd = o.head_dim > 0 ? o.head_dim : o.n_embd / o.n_head;
  if (o.head_dim <= 0 && o.n_embd % o.n_head != 0) {
    return error(StatusCode::kInvalidArgument, "synth: n_embd {} is not a multiple of n_head {}; give --head-dim",
                 o.n_embd, o.n_head);
  }
  if (hd % 2 != 0) return error(StatusCode::kInvalidArgument, "synth: head_dim {} must be even", hd);
  const bool moe = arch->requires_experts || o.n_expert > 0;
  if (moe && (o.n_expert < 1 || o.n_expert_used < 1 || o.n_expert_used > o.n_expert)) {
    return error(StatusCode::kInvalidArgument,
                 "synth: {} needs experts: --experts N and --experts-used K with 1 <= K <= N (got {} and {})", o.arch,
                 o.n_expert, o.n_expert_used);
  }
  if (!moe && o.n_expert > 0) {
    return error(StatusCode::kInvalidArgument, "synth: {} has no experts (mixtral is llama with --experts)", o.arch);
  }
  // What llama.cpp's loader asks of each family, so that it reads these
  // files too (src/model/arch/ says which family needs what).
  if (moe && !arch->expert_ff_key && o.n_ff_exp > 0 && o.n_ff_exp != o.n_ff) {
    return error(StatusCode::kInvalidArgument,
                 "synth: {} experts are feed_forward_length wide (llama.cpp reads no other width for them): "
                 "give --n-ff {} instead of --expert-ff",
                 o.arch == "llama" ? "mixtral" : o.arch, o.n_ff_exp);
  }
  if (arch->attention_n_embd && o.n_head * hd != o.n_embd) {
    return error(StatusCode::kInvalidArgument,
                 "synth: {} needs n_head x head_dim = n_embd (llama.cpp reads its attention as n_embd wide); "
                 "got {} x {} for n_embd {}",
                 o.arch, o.n_head, hd, o.n_embd);
  }
  if (arch->qk_norm == QkNorm::kWhole && o.n_head_kv != o.n_head) {
    return error(StatusCode::kInvalidArgument,
                 "synth: {} has as many KV heads as heads (llama.cpp normalises k over n_embd); got {} of {}",
                 o.arch, o.n_head_kv, o.n_head);
  }
  if (arch->layers == LayerPattern::kKvHeadsZeroConv) {
    if (o.conv_kernel < 2 || o.conv_kernel > 64) {
      return error(StatusCode::kInvalidArgument, "synth: the convolution kernel must have 2..64 taps (got {})",
                   o.conv_kernel);
    }
    bool any = false;
    for (int l = 0; l < o.n_layer; ++l) any = any || attends(o, arch, l);
    for (int l : o.attention_layers) {
      if (l < 0) return error(StatusCode::kInvalidArgument, "synth: attention layer {} is negative", l);
    }
    if (!any) {
      return error(StatusCode::kInvalidArgument, "synth: {} needs an attention layer below --layers {}", o.arch,
                   o.n_layer);
    }
    if (moe && (o.n_dense_leading < 0 || o.n_dense_leading >= o.n_layer)) {
      return error(StatusCode::kInvalidArgument, "synth: {} dense layers leave no layer for the experts (--layers {})",
                   o.n_dense_leading, o.n_layer);
    }
  } else if (arch->layers == LayerPattern::kFullAttentionInterval) {
    if (o.full_attention_interval < 1 || o.full_attention_interval > o.n_layer) {
      return error(StatusCode::kInvalidArgument, "synth: {} needs a full-attention interval of 1..{} (--layers); got {}",
                   o.arch, o.n_layer, o.full_attention_interval);
    }
    if (o.ssm_conv_kernel < 2 || o.ssm_conv_kernel > 64 || o.ssm_k_heads < 1 || o.ssm_v_heads < 1 || o.ssm_k_dim < 1 ||
        o.ssm_v_dim < 1 || o.ssm_v_heads % o.ssm_k_heads != 0) {
      return error(StatusCode::kInvalidArgument, "synth: DeltaNet shape: kernel {} (2..64), {} k-heads of {}, {} v-heads "
                   "of {} (v-heads a multiple of k-heads)", o.ssm_conv_kernel, o.ssm_k_heads, o.ssm_k_dim,
                   o.ssm_v_heads, o.ssm_v_dim);
    }
  } else if (!o.attention_layers.empty() || o.n_dense_leading > 0) {
    return error(StatusCode::kInvalidArgument, "synth: {} attends in every layer and has no leading dense layers; "
                 "--attention-layers and --dense-layers are for lfm2 and lfm2moe", o.arch);
  }
  const int ff_exp = expert_ff(o, arch);
  const int ff_sh = o.n_ff_shexp > 0 ? o.n_ff_shexp : o.n_ff;
  const uint32_t block = info->block_elems;
  for (int k : {o.n_embd, o.n_ff, o.n_head * hd, ff_exp, ff_sh, o.ssm_v_heads * o.ssm_v_dim}) {
    if (k % static_cast<int>(block) != 0) {
      return error(StatusCode::kInvalidArgument, "synth: input width {} is not a multiple of {}'s block size {}", k,
                   info->name, block);
    }
  }

  const std::string a = o.arch + ".";
  w->set("general.architecture", GgufValue::make_string(o.arch));
  w->set("general.name", GgufValue::make_string("ork synthetic " + o.arch + " (random weights)"));
  // llama.cpp's llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_BF16 32.
  const uint32_t file_type = o.type == GgmlType::kF32    ? 0
                             : o.type == GgmlType::kF16  ? 1
                             : o.type == GgmlType::kQ4_0 ? 2
                             : o.type == GgmlType::kQ8_0 ? 7
                                                         : 32;
  w->set("general.file_type", GgufValue::make_uint32(file_type));
  w->set(a + "context_length", GgufValue::make_uint32(static_cast<uint32_t>(o.n_ctx)));
  w->set(a + "embedding_length", GgufValue::make_uint32(static_cast<uint32_t>(o.n_embd)));
  w->set(a + "block_count", GgufValue::make_uint32(static_cast<uint32_t>(o.n_layer)));
  w->set(a + "feed_forward_length", GgufValue::make_uint32(static_cast<uint32_t>(o.n_ff)));
  w->set(a + "attention.head_count", GgufValue::make_uint32(static_cast<uint32_t>(o.n_head)));
  if (arch->layers == LayerPattern::kKvHeadsZeroConv) {
    // lfm2: KV heads per layer, 0 for a short convolution.
    std::vector<int64_t> kv_heads;
    for (int l = 0; l < o.n_layer; ++l) kv_heads.push_back(attends(o, arch, l) ? o.n_head_kv : 0);
    w->set(a + "attention.head_count_kv", GgufValue::make_int32_array(std::move(kv_heads)));
    w->set(a + "shortconv.l_cache", GgufValue::make_uint32(static_cast<uint32_t>(o.conv_kernel)));
  } else {
    w->set(a + "attention.head_count_kv", GgufValue::make_uint32(static_cast<uint32_t>(o.n_head_kv)));
  }
  if (o.head_dim > 0) {
    w->set(a + "attention.key_length", GgufValue::make_uint32(static_cast<uint32_t>(hd)));
    w->set(a + "attention.value_length", GgufValue::make_uint32(static_cast<uint32_t>(hd)));
  }
  const int n_rot = o.n_rot > 0 ? o.n_rot : arch->layers == LayerPattern::kFullAttentionInterval ? hd / 4 : hd;
  w->set(a + "rope.dimension_count", GgufValue::make_uint32(static_cast<uint32_t>(n_rot)));
  if (arch->layers == LayerPattern::kFullAttentionInterval) {
    // qwen35: IMROPE's sections (text positions make them one rotation), the DeltaNets' shape.
    w->set(a + "rope.dimension_sections", GgufValue::make_int32_array({n_rot / 16 * 3, n_rot / 16 * 3, n_rot / 8, 0}));
    w->set(a + "full_attention_interval", GgufValue::make_uint32(static_cast<uint32_t>(o.full_attention_interval)));
    w->set(a + "ssm.conv_kernel", GgufValue::make_uint32(static_cast<uint32_t>(o.ssm_conv_kernel)));
    w->set(a + "ssm.state_size", GgufValue::make_uint32(static_cast<uint32_t>(o.ssm_k_dim)));
    w->set(a + "ssm.group_count", GgufValue::make_uint32(static_cast<uint32_t>(o.ssm_k_heads)));
    w->set(a + "ssm.time_step_rank", GgufValue::make_uint32(static_cast<uint32_t>(o.ssm_v_heads)));
    w->set(a + "ssm.inner_size", GgufValue::make_uint32(static_cast<uint32_t>(o.ssm_v_heads * o.ssm_v_dim)));
  }
  w->set(a + "rope.freq_base", GgufValue::make_float32(o.arch == "llama" ? 10000.0f : 1000000.0f));
  w->set(a + "attention.layer_norm_rms_epsilon", GgufValue::make_float32(o.arch == "llama" ? 1e-5f : 1e-6f));
  w->set(a + "vocab_size", GgufValue::make_uint32(static_cast<uint32_t>(o.n_vocab)));
  if (moe) {
    w->set(a + "expert_count", GgufValue::make_uint32(static_cast<uint32_t>(o.n_expert)));
    w->set(a + "expert_used_count", GgufValue::make_uint32(static_cast<uint32_t>(o.n_expert_used)));
    if (arch->expert_ff_key) w->set(a + "expert_feed_forward_length", GgufValue::make_uint32(static_cast<uint32_t>(ff_exp)));
    if (arch->shared_expert) {
      w->set(a + "expert_shared_feed_forward_length", GgufValue::make_uint32(static_cast<uint32_t>(ff_sh)));
    }
    if (arch->layers == LayerPattern::kKvHeadsZeroConv) {
      // lfm2moe: sigmoid gates with a selection bias (llama.cpp's gating 2).
      w->set(a + "leading_dense_block_count", GgufValue::make_uint32(static_cast<uint32_t>(o.n_dense_leading)));
      w->set(a + "expert_gating_func", GgufValue::make_uint32(2));
    }
  }

  std::vector<std::string> tokens;
  std::vector<double> scores;
  std::vector<int64_t> types;
  synth_vocab(o.n_vocab, &tokens, &scores, &types);
  w->set("tokenizer.ggml.model", GgufValue::make_string("llama"));
  w->set("tokenizer.ggml.pre", GgufValue::make_string("default"));
  w->set("tokenizer.ggml.tokens", GgufValue::make_string_array(std::move(tokens)));
  w->set("tokenizer.ggml.scores", GgufValue::make_float32_array(std::move(scores)));
  w->set("tokenizer.ggml.token_type", GgufValue::make_int32_array(std::move(types)));
  w->set("tokenizer.ggml.bos_token_id", GgufValue::make_uint32(1));
  w->set("tokenizer.ggml.eos_token_id", GgufValue::make_uint32(2));
  w->set("tokenizer.ggml.unknown_token_id", GgufValue::make_uint32(0));
  w->set("tokenizer.ggml.add_bos_token", GgufValue::make_bool(true));
  w->set("tokenizer.ggml.add_eos_token", GgufValue::make_bool(false));

  auto plans = std::make_shared<std::vector<TensorPlan>>(plan_tensors(o, arch, hd));
  for (const TensorPlan& t : *plans) ORK_RETURN_IF_ERROR(w->add_tensor(t.name, t.type, t.dims));

  // Matrices and biases ~ N(0, 0.02^2); norm weights 1 + N(0, 0.1^2), not
  // all ones, so a missing norm multiply shows in tests; convolution
  // kernels N(0, 1 / taps); a DeltaNet's A negative, -(0.05 + 0.5 |N(0,1)|),
  // so its decays span about exp(-0.05..-1) per token. Every value is
  // rounded to bf16 first, as in the checkpoints these stand in for (trained
  // and shipped in bf16; llama.cpp's converter writes some tensors, the MoE
  // routers among them, widened to F32).
  const uint64_t seed = o.seed;
  // Rows in parallel, the same bytes as in order: a row takes the next
  // 2 x cols draws of its tensor's stream (normal() draws twice), and
  // splitmix64's state only adds a constant a draw, so row r's generator
  // starts at the tensor's state plus 2 x cols x r of it.
  auto pool = std::make_shared<ThreadPool>(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  *data_fn = [plans, seed, pool](size_t index, std::vector<uint8_t>& out) {
    const TensorPlan& t = (*plans)[index];
    const uint64_t start = seed * 0x100000001B3ull + index * Rng::kGamma + 1;
    const uint64_t cols = t.dims[0];
    uint64_t rows = 1;  // every row of every expert of a 3-D tensor
    for (size_t d = 1; d < t.dims.size(); ++d) rows *= t.dims[d];
    const uint64_t row_bytes = ggml_row_bytes(*ggml_type_info(static_cast<uint32_t>(t.type)), cols);
    pool->run(
        static_cast<int64_t>(rows),
        [&](int64_t r0, int64_t r1) {
          std::vector<float> row(cols);
          Rng rng{start + static_cast<uint64_t>(r0) * 2 * cols * Rng::kGamma};
          for (int64_t r = r0; r < r1; ++r) {
            for (auto& v : row) {
              const float z = rng.normal();
              const float x = t.kind == TensorPlan::kNorm     ? 1.0f + 0.1f * z
                              : t.kind == TensorPlan::kConv   ? z / std::sqrt(static_cast<float>(cols))
                              : t.kind == TensorPlan::kDecayA ? -(0.05f + 0.5f * std::fabs(z))
                                                              : 0.02f * z;
              v = bf16_to_f32(f32_to_bf16(x));
            }
            (void)quantize(t.type, row.data(), out.data() + r * row_bytes, static_cast<int64_t>(cols));
          }
        },
        std::max<int64_t>(1, int64_t{1 << 13} / static_cast<int64_t>(cols)));
  };
  return Status::ok();
}

Status synth_write_file(const SynthOptions& options, const std::string& path) {
  GgufWriter writer;
  GgufWriter::DataFn data_fn;
  ORK_RETURN_IF_ERROR(synth_model(options, &writer, &data_fn));
  return writer.write_file(path, data_fn);
}

Result<std::vector<uint8_t>> synth_write_memory(const SynthOptions& options) {
  GgufWriter writer;
  GgufWriter::DataFn data_fn;
  ORK_RETURN_IF_ERROR(synth_model(options, &writer, &data_fn));
  return writer.write_memory(data_fn);
}

}  // namespace ork
