// qwen2: Qwen 1.5 / 2 / 2.5 dense. NEOX RoPE and a bias on q, k and v.
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchQwen2 = {"qwen2", RopeType::kNeox, /*qkv_bias=*/true, QkNorm::kNone,
                                  /*requires_experts=*/false, /*norm_topk=*/false, /*shared_expert=*/false,
                                  /*expert_ff_key=*/false, /*output_required=*/false, /*attention_n_embd=*/false};
}
