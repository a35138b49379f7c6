// Hyper-parameters of a llama-family transformer, read from GGUF metadata
// with llama.cpp's key names (`<arch>.embedding_length`, ...), including the
// hybrid families whose layers are not all attention (LFM2's short
// convolutions).
#pragma once

#include <string>
#include <vector>

#include "format/gguf/gguf.h"
#include "core/op_params.h"

namespace ork {

// RMSNorm of q and k before RoPE: none, per head (weights of head_dim:
// qwen3, qwen3moe) or over the whole projection (weights of q_dim / kv_dim:
// olmoe).
enum class QkNorm { kNone, kPerHead, kWhole };

// What mixes tokens in one layer: attention over the KV cache, or a gated
// short causal convolution over the last few tokens (LFM2), whose state is
// a window of past inputs rather than a cache that grows.
// Or a gated DeltaNet (Qwen3.5): linear attention whose state is one
// matrix per head, updated by the delta rule token by token.
enum class BlockKind : uint8_t { kAttention, kShortConv, kDeltaNet };

// A layer's feed-forward: dense (n_ff) or a mixture of experts.
enum class FfnKind : uint8_t { kDense, kMoe };

// How the router turns its logits into expert weights: a softmax over all
// experts, or an independent sigmoid per expert (LFM2-MoE:
// `<arch>.expert_gating_func` = 2), whose top k may be chosen with a
// per-expert selection bias (exp_probs_b) that does not enter the weights.
enum class Gating : uint8_t { kSoftmax, kSigmoid };

// Where an architecture's layer pattern comes from.
enum class LayerPattern : uint8_t {
  kAttention,       // every layer attends
  kKvHeadsZeroConv,  // `attention.head_count_kv` per layer; 0 = a short-convolution layer (lfm2)
  kFullAttentionInterval  // layer l attends iff (l + 1) % `full_attention_interval` == 0, else DeltaNet (qwen35)
};

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
  LayerPattern layers = LayerPattern::kAttention;
  // The final norm's tensor (lfm2: "token_embd_norm.weight").
  const char* output_norm = "output_norm.weight";
  // Each layer's FFN norm (qwen35: "post_attention_norm.weight").
  const char* ffn_norm = "ffn_norm.weight";
  // Gated attention (qwen35): attn_q gives each head's query and an output
  // gate side by side (2 x head_dim per head); the attention's output is
  // multiplied by sigmoid(gate).
  bool gated_attention = false;
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
  Gating gating = Gating::kSoftmax;

  // Per layer: what mixes tokens and what the FFN is. Attention layers own
  // KV-cache slots 0.. in layer order (kv_slot, -1 for the others); short
  // convolutions keep `conv_kernel` - 1 past inputs (`shortconv.l_cache`).
  std::vector<BlockKind> blocks;
  std::vector<FfnKind> ffns;
  std::vector<int> kv_slot, conv_slot;
  int n_kv_layers = 0, n_conv_layers = 0;
  int conv_kernel = 0;
  // Gated DeltaNet layers (qwen35): `ssm.group_count` k-heads of
  // `ssm.state_size` (q and k), `ssm.time_step_rank` v-heads of
  // `ssm.inner_size` / v-heads; v-head j reads k-head j % k-heads. A
  // causal convolution of `ssm.conv_kernel` taps over q, k and v first.
  std::vector<int> delta_slot;
  int n_delta_layers = 0;
  int ssm_conv_kernel = 0, ssm_k_heads = 0, ssm_v_heads = 0, ssm_k_dim = 0, ssm_v_dim = 0;
  int ssm_qkv_dim() const { return 2 * ssm_k_heads * ssm_k_dim + ssm_v_heads * ssm_v_dim; }
  int ssm_inner() const { return ssm_v_heads * ssm_v_dim; }

  bool is_moe() const { return n_expert > 0; }
  bool is_hybrid() const { return n_conv_layers > 0 || n_delta_layers > 0; }
  // Whether truncating below n_past must start over (a DeltaNet's state
  // cannot be rewound).
  bool has_delta_layers() const { return n_delta_layers > 0; }
  bool attends(int layer) const { return blocks[static_cast<size_t>(layer)] == BlockKind::kAttention; }
  bool moe_layer(int layer) const { return ffns[static_cast<size_t>(layer)] == FfnKind::kMoe; }

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
};

// Reads and validates the hyper-parameters; errors name the file and key.
Result<ModelConfig> read_model_config(const GgufFile& gguf);

}  // namespace ork
