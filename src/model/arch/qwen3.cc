// qwen3: Qwen 3 dense. NEOX RoPE, no biases, and an RMSNorm over each head
// of q and k (weights of head_dim) applied before RoPE.
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchQwen3 = {"qwen3", RopeType::kNeox, /*qkv_bias=*/false, QkNorm::kPerHead,
                                  /*requires_experts=*/false, /*norm_topk=*/false, /*shared_expert=*/false,
                                  /*expert_ff_key=*/false, /*output_required=*/false, /*attention_n_embd=*/false};
}
