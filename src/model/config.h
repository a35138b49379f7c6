// Hyper-parameters of a llama-family transformer, read from GGUF metadata
// with llama.cpp's key names (`<arch>.embedding_length`, ...).
#pragma once

#include <string>

#include "format/gguf/gguf.h"
#include "core/op_params.h"

namespace ork {

// RMSNorm of q and k before RoPE: none, per head (weights of head_dim:
// qwen3, qwen3moe) or over the whole projection (weights of q_dim / kv_dim:
// olmoe).
enum class QkNorm { kNone, kPerHead, kWhole };

// What distinguishes one architecture of the llama family from another.
// Each architecture file (src/model/arch/) defines one.
struct ArchSpec {
  const char* name;          // general.architecture
  RopeType rope_type;
  bool qkv_bias;             // attn_{q,k,v}.bias (qwen2, qwen2moe)
  QkNorm qk_norm;
  // Mixture of experts. An architecture that `requires_experts` has them in
  // every layer; llama has them when `<arch>.expert_count` > 0 (mixtral).
  // The router is softmax over all experts, then the top n_expert_used;
  // `norm_topk` renormalises their weights to sum 1.
  bool requires_experts;
  bool norm_topk;
  bool shared_expert;        // qwen2moe: one more expert, gated by sigmoid(w . x)
  // Each expert's FFN width, as llama.cpp reads it: `<arch>.expert_feed_forward_length`
  // (the Qwen MoEs; feed_forward_length / expert_used_count when absent), or
  // feed_forward_length itself (mixtral, olmoe: no other key is read).
  bool expert_ff_key;
  // llama.cpp's loader needs output.weight (no tying to token_embd).
  bool output_required;
  // llama.cpp's loader reads q and attn_output as n_embd wide (n_head x
  // head_dim must equal n_embd).
  bool attention_n_embd;
};

const ArchSpec* find_arch(const std::string& name);
std::string supported_arch_names();

struct ModelConfig {
  const ArchSpec* arch = nullptr;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_ff = 0;
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_rot = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  float rms_eps = 1e-5f;
  // Mixture of experts (n_expert = 0: a dense FFN of n_ff).
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_exp = 0;      // each expert's FFN width
  int n_ff_shexp = 0;    // the shared expert's (qwen2moe)

  bool is_moe() const { return n_expert > 0; }

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
};

// Reads and validates the hyper-parameters; errors name the file and key.
Result<ModelConfig> read_model_config(const GgufFile& gguf);

}  // namespace ork
