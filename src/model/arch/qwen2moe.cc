// qwen2moe: Qwen 1.5/2 MoE. qwen2's attention (NEOX RoPE, q/k/v biases)
// with a mixture of experts: softmax over all experts, the top
// n_expert_used with their probabilities as they are (not renormalised),
// plus a shared expert of expert_shared_feed_forward_length whose output is
// scaled by sigmoid(ffn_gate_inp_shexp . x). (llama.cpp's loader wants an
// output.weight, and q and attn_output n_embd wide.)
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchQwen2Moe = {"qwen2moe", RopeType::kNeox, /*qkv_bias=*/true, QkNorm::kNone,
                                       /*requires_experts=*/true, /*norm_topk=*/false, /*shared_expert=*/true,
                                       /*expert_ff_key=*/true, /*output_required=*/true, /*attention_n_embd=*/true};
}
