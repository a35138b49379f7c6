// qwen3moe: Qwen 3 MoE (Qwen3-30B-A3B family). qwen3's attention (NEOX
// RoPE, per-head QK-norm, no biases) with every FFN a mixture of experts:
// softmax over all experts, the top n_expert_used, their weights
// renormalised to sum 1 (llama.cpp fixes this for qwen3moe), SwiGLU experts
// of expert_feed_forward_length, no shared expert.
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchQwen3Moe = {"qwen3moe", RopeType::kNeox, /*qkv_bias=*/false, QkNorm::kPerHead,
                                       /*requires_experts=*/true, /*norm_topk=*/true, /*shared_expert=*/false,
                                       /*expert_ff_key=*/true, /*output_required=*/false, /*attention_n_embd=*/false};
}
