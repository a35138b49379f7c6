// olmoe: OLMoE (AI2). NEOX RoPE, no biases, an RMSNorm over the whole q and
// k projections (not per head) before RoPE, and a mixture of experts:
// softmax over all experts, the top n_expert_used, weights not renormalised.
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchOlmoe = {"olmoe", ref::RopeType::kNeox, /*qkv_bias=*/false, QkNorm::kWhole,
                                    /*requires_experts=*/true, /*norm_topk=*/false, /*shared_expert=*/false};
}
