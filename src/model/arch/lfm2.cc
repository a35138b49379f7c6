// lfm2: Liquid AI's LFM2. A hybrid: most layers mix tokens with a gated
// short causal convolution (in_proj to B, C, X; C * conv(B * X) over the
// last `shortconv.l_cache` tokens; out_proj), the others with grouped-query
// attention (per-head QK-norm before NEOX RoPE, no biases), told apart by a
// per-layer `attention.head_count_kv` of 0. Dense SwiGLU FFNs, the output
// tied to the embedding, the final norm named token_embd_norm.
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchLfm2 = {"lfm2", RopeType::kNeox, /*qkv_bias=*/false, QkNorm::kPerHead,
                                   /*requires_experts=*/false, /*norm_topk=*/false, /*shared_expert=*/false,
                                   /*expert_ff_key=*/true, /*output_required=*/false, /*attention_n_embd=*/true,
                                   LayerPattern::kKvHeadsZeroConv, "token_embd_norm.weight"};
}
