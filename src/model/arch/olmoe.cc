// olmoe: OLMoE (AI2). NEOX RoPE, no biases, an RMSNorm over the whole q and
// k projections (not per head) before RoPE, and a mixture of experts:
// softmax over all experts, the top n_expert_used, weights not renormalised,
// experts of feed_forward_length. (llama.cpp's loader wants both norms of
// n_embd - OLMoE has as many KV heads as heads - and an output.weight.)
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchOlmoe = {"olmoe", RopeType::kNeox, /*qkv_bias=*/false, QkNorm::kWhole,
                                    /*requires_experts=*/true, /*norm_topk=*/false, /*shared_expert=*/false,
                                    /*expert_ff_key=*/false, /*output_required=*/true, /*attention_n_embd=*/true};
}
