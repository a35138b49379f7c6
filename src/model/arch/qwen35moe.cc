// qwen35moe: Qwen 3.5 MoE (Qwen3.6-35B-A3B). qwen35's layers with every FFN
// a mixture of SwiGLU experts (softmax over all, the top k renormalised)
// plus a shared expert scaled by sigmoid(ffn_gate_inp_shexp . x).
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchQwen35Moe = {"qwen35moe", RopeType::kNeox, /*qkv_bias=*/false, QkNorm::kPerHead,
                                        /*requires_experts=*/true, /*norm_topk=*/true, /*shared_expert=*/true,
                                        /*expert_ff_key=*/true, /*output_required=*/false, /*attention_n_embd=*/false,
                                        LayerPattern::kFullAttentionInterval, "output_norm.weight",
                                        "post_attention_norm.weight", /*gated_attention=*/true};
}
