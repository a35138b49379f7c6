#include "model/config.h"

#include <algorithm>
#include <array>

namespace ork {

extern const ArchSpec kArchLlama;
extern const ArchSpec kArchQwen2;
extern const ArchSpec kArchQwen3;
extern const ArchSpec kArchQwen2Moe;
extern const ArchSpec kArchQwen3Moe;
extern const ArchSpec kArchOlmoe;
extern const ArchSpec kArchLfm2;
extern const ArchSpec kArchLfm2Moe;
extern const ArchSpec kArchQwen35;
extern const ArchSpec kArchQwen35Moe;

namespace {
const std::array<const ArchSpec*, 10> kArchs = {&kArchLlama,  &kArchQwen2, &kArchQwen3,  &kArchQwen2Moe, &kArchQwen3Moe,
                                                &kArchOlmoe,  &kArchLfm2,  &kArchLfm2Moe, &kArchQwen35,  &kArchQwen35Moe};
}

const ArchSpec* find_arch(const std::string& name) {
  for (const ArchSpec* a : kArchs) {
    if (name == a->name) return a;
  }
  return nullptr;
}

std::string supported_arch_names() {
  std::string out;
  for (const ArchSpec* a : kArchs) out += (out.empty() ? "" : ", ") + std::string(a->name);
  return out;
}

namespace {

Status require_positive(const GgufFile& gguf, const std::string& key, int64_t value, int64_t max) {
  if (value <= 0 || value > max) {
    return error(StatusCode::kCorrupt, "{}: metadata '{}' = {} is out of range (1..{})", gguf.path(), key, value, max);
  }
  return Status::ok();
}

// qwen35: every `full_attention_interval`-th layer attends, the others
// are gated DeltaNets whose shape the `ssm.*` keys give.
Status read_delta_net(const GgufFile& gguf, const std::string& p, ModelConfig* c) {
  auto get = [&](const char* key, int64_t lo, int64_t hi, int* out) -> Status {
    ORK_ASSIGN_OR_RETURN(const int64_t v, gguf.get_int(p + key));
    if (v < lo || v > hi) {
      return error(StatusCode::kCorrupt, "{}: metadata '{}{}' = {} is out of range ({}..{})", gguf.path(), p, key, v, lo,
                   hi);
    }
    *out = static_cast<int>(v);
    return Status::ok();
  };
  int interval = 0, inner = 0;
  ORK_RETURN_IF_ERROR(get("full_attention_interval", 1, c->n_layer, &interval));
  ORK_RETURN_IF_ERROR(get("ssm.conv_kernel", 2, 64, &c->ssm_conv_kernel));
  ORK_RETURN_IF_ERROR(get("ssm.state_size", 1, 1024, &c->ssm_k_dim));
  ORK_RETURN_IF_ERROR(get("ssm.group_count", 1, 1024, &c->ssm_k_heads));
  ORK_RETURN_IF_ERROR(get("ssm.time_step_rank", 1, 1024, &c->ssm_v_heads));
  ORK_RETURN_IF_ERROR(get("ssm.inner_size", 1, 1 << 20, &inner));
  if (inner % c->ssm_v_heads != 0 || c->ssm_v_heads % c->ssm_k_heads != 0) {
    return error(StatusCode::kCorrupt, "{}: metadata '{}ssm.inner_size' = {} is not a multiple of '{}ssm.time_step_rank' "
                 "= {}, or that is not a multiple of '{}ssm.group_count' = {}", gguf.path(), p, inner, p,
                 c->ssm_v_heads, p, c->ssm_k_heads);
  }
  c->ssm_v_dim = inner / c->ssm_v_heads;
  for (int l = 0; l < c->n_layer; ++l) {
    c->blocks[static_cast<size_t>(l)] = (l + 1) % interval == 0 ? BlockKind::kAttention : BlockKind::kDeltaNet;
  }
  return Status::ok();
}

// Which layers attend and how many KV heads they have. An lfm2 file gives
// `attention.head_count_kv` per layer (0 for a short-convolution layer; the
// attention layers must agree) and the convolution's width as
// `shortconv.l_cache`; every other architecture attends in every layer.
Status read_layer_pattern(const GgufFile& gguf, const std::string& p, ModelConfig* c) {
  const std::string kv_key = p + "attention.head_count_kv";
  const GgufValue* kv = gguf.find(kv_key);
  c->blocks.assign(static_cast<size_t>(c->n_layer), BlockKind::kAttention);
  if (kv != nullptr && kv->is_array()) {
    if (c->arch->layers != LayerPattern::kKvHeadsZeroConv) {
      return error(StatusCode::kUnsupported, "{}: metadata '{}' is an array: per-layer KV heads are not supported for "
                   "architecture '{}'", gguf.path(), kv_key, c->arch->name);
    }
    if (kv->ints.size() != static_cast<size_t>(c->n_layer)) {
      return error(StatusCode::kCorrupt, "{}: metadata '{}' has {} entries for {} layers ('{}block_count')",
                   gguf.path(), kv_key, kv->array_size(), c->n_layer, p);
    }
    c->n_head_kv = 0;
    for (size_t l = 0; l < kv->ints.size(); ++l) {
      const int64_t v = kv->ints[l];
      if (v < 0 || v > c->n_head) {
        return error(StatusCode::kCorrupt, "{}: metadata '{}'[{}] = {} is out of range (0..{})", gguf.path(), kv_key, l,
                     v, c->n_head);
      }
      if (v == 0) {
        c->blocks[l] = BlockKind::kShortConv;
      } else if (c->n_head_kv != 0 && v != c->n_head_kv) {
        return error(StatusCode::kUnsupported, "{}: metadata '{}' gives {} KV heads to one layer and {} to layer {}; "
                     "ork needs one count for every attention layer", gguf.path(), kv_key, c->n_head_kv, v, l);
      } else {
        c->n_head_kv = static_cast<int>(v);
      }
    }
    if (c->n_head_kv == 0) {
      return error(StatusCode::kUnsupported, "{}: metadata '{}' has no attention layer", gguf.path(), kv_key);
    }
  } else if (kv != nullptr) {
    ORK_ASSIGN_OR_RETURN(const int64_t v, gguf.get_int(kv_key));
    ORK_RETURN_IF_ERROR(require_positive(gguf, kv_key, v, 1 << 14));
    c->n_head_kv = static_cast<int>(v);
  } else {
    c->n_head_kv = c->n_head;
  }
  if (c->arch->layers == LayerPattern::kFullAttentionInterval) {
    ORK_RETURN_IF_ERROR(read_delta_net(gguf, p, c));
  }
  for (BlockKind b : c->blocks) {
    c->kv_slot.push_back(b == BlockKind::kAttention ? c->n_kv_layers++ : -1);
    c->conv_slot.push_back(b == BlockKind::kShortConv ? c->n_conv_layers++ : -1);
    c->delta_slot.push_back(b == BlockKind::kDeltaNet ? c->n_delta_layers++ : -1);
  }
  if (c->arch->layers == LayerPattern::kKvHeadsZeroConv) {
    const std::string key = p + "shortconv.l_cache";
    ORK_ASSIGN_OR_RETURN(const int64_t l_cache, gguf.get_int(key));
    if (l_cache < 2 || l_cache > 64) {
      return error(StatusCode::kCorrupt, "{}: metadata '{}' = {} is out of range (2..64)", gguf.path(), key, l_cache);
    }
    c->conv_kernel = static_cast<int>(l_cache);
  }
  return Status::ok();
}

}  // namespace

Result<ModelConfig> read_model_config(const GgufFile& gguf) {
  ORK_ASSIGN_OR_RETURN(const std::string arch_name, gguf.get_string("general.architecture"));
  ModelConfig c;
  c.arch = find_arch(arch_name);
  if (c.arch == nullptr) {
    return error(StatusCode::kUnsupported, "{}: architecture '{}' is not supported (supported: {})", gguf.path(),
                 arch_name, supported_arch_names());
  }
  const std::string p = arch_name + ".";
  auto get = [&](const std::string& key, int64_t fallback, int64_t max, int* out) -> Status {
    int64_t v = fallback;
    if (gguf.find(p + key) != nullptr || fallback < 0) {
      auto r = gguf.get_int(p + key);
      if (!r.is_ok()) return r.status();
      v = *r;
    }
    ORK_RETURN_IF_ERROR(require_positive(gguf, p + key, v, max));
    *out = static_cast<int>(v);
    return Status::ok();
  };
  ORK_RETURN_IF_ERROR(get("embedding_length", -1, 1 << 20, &c.n_embd));
  ORK_RETURN_IF_ERROR(get("block_count", -1, 4096, &c.n_layer));
  ORK_RETURN_IF_ERROR(get("feed_forward_length", -1, 1 << 22, &c.n_ff));
  ORK_RETURN_IF_ERROR(get("attention.head_count", -1, 1 << 14, &c.n_head));
  ORK_RETURN_IF_ERROR(read_layer_pattern(gguf, p, &c));
  ORK_RETURN_IF_ERROR(get("context_length", 2048, 1 << 24, &c.n_ctx_train));
  if (c.n_head % c.n_head_kv != 0) {
    return error(StatusCode::kCorrupt, "{}: head_count {} is not a multiple of head_count_kv {}", gguf.path(),
                 c.n_head, c.n_head_kv);
  }
  const int default_head_dim = c.n_embd % c.n_head == 0 ? c.n_embd / c.n_head : -1;
  ORK_RETURN_IF_ERROR(get("attention.key_length", default_head_dim, 1 << 16, &c.head_dim));
  int value_length = c.head_dim;
  ORK_RETURN_IF_ERROR(get("attention.value_length", c.head_dim, 1 << 16, &value_length));
  if (value_length != c.head_dim) {
    return error(StatusCode::kUnsupported, "{}: value_length {} differs from key_length {}", gguf.path(),
                 value_length, c.head_dim);
  }
  ORK_RETURN_IF_ERROR(get("rope.dimension_count", c.head_dim, c.head_dim, &c.n_rot));
  if (c.n_rot % 2 != 0) return error(StatusCode::kCorrupt, "{}: rope.dimension_count {} is odd", gguf.path(), c.n_rot);

  c.rope_freq_base = static_cast<float>(gguf.find_float(p + "rope.freq_base").value_or(10000.0));
  c.rms_eps = static_cast<float>(gguf.find_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (!(c.rope_freq_base > 0) || !(c.rms_eps > 0)) {
    return error(StatusCode::kCorrupt, "{}: rope.freq_base and layer_norm_rms_epsilon must be positive", gguf.path());
  }
  const std::string scaling = gguf.find_string(p + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    const double factor = gguf.find_float(p + "rope.scaling.factor").value_or(1.0);
    if (!(factor > 0)) return error(StatusCode::kCorrupt, "{}: rope.scaling.factor must be positive", gguf.path());
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none" && scaling != "") {
    return error(StatusCode::kUnsupported, "{}: rope.scaling.type '{}' is not supported (none, linear)", gguf.path(),
                 scaling);
  }

  // Every layer's FFN is dense unless the model has experts, which fill
  // every layer after `leading_dense_block_count` dense ones.
  c.ffns.assign(static_cast<size_t>(c.n_layer), FfnKind::kDense);
  // Experts: required by the MoE architectures, optional for llama (mixtral).
  const bool has_experts = gguf.find(p + "expert_count") != nullptr;
  if (c.arch->requires_experts || has_experts) {
    ORK_RETURN_IF_ERROR(get("expert_count", -1, 1 << 16, &c.n_expert));
    ORK_RETURN_IF_ERROR(get("expert_used_count", -1, c.n_expert, &c.n_expert_used));
    // As llama.cpp reads them: the Qwen MoEs name their experts' width
    // (without the key, feed_forward_length is split over the experts used);
    // mixtral's and OLMoE's experts are feed_forward_length wide.
    if (c.arch->expert_ff_key) {
      ORK_RETURN_IF_ERROR(get("expert_feed_forward_length", c.n_ff / c.n_expert_used, 1 << 22, &c.n_ff_exp));
    } else {
      c.n_ff_exp = c.n_ff;
    }
    if (c.arch->shared_expert) {
      ORK_RETURN_IF_ERROR(get("expert_shared_feed_forward_length", c.n_ff, 1 << 22, &c.n_ff_shexp));
    }
    int leading_dense = 0;
    if (gguf.find(p + "leading_dense_block_count") != nullptr) {
      ORK_ASSIGN_OR_RETURN(const int64_t v, gguf.get_int(p + "leading_dense_block_count"));
      if (v < 0 || v >= c.n_layer) {
        return error(StatusCode::kCorrupt, "{}: metadata '{}leading_dense_block_count' = {} is out of range (0..{})",
                     gguf.path(), p, v, c.n_layer - 1);
      }
      leading_dense = static_cast<int>(v);
    }
    std::fill(c.ffns.begin() + leading_dense, c.ffns.end(), FfnKind::kMoe);
    // llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE: 1 softmax, 2 sigmoid.
    if (gguf.find(p + "expert_gating_func") != nullptr) {
      ORK_ASSIGN_OR_RETURN(const int64_t g, gguf.get_int(p + "expert_gating_func"));
      if (g != 1 && g != 2) {
        return error(StatusCode::kUnsupported, "{}: metadata '{}expert_gating_func' = {} is not supported (1 softmax, "
                     "2 sigmoid)", gguf.path(), p, g);
      }
      c.gating = g == 2 ? Gating::kSigmoid : Gating::kSoftmax;
    }
  }
  return c;
}

}  // namespace ork
