// qwen35: Qwen 3.5 (Qwen3-Next's successor). A hybrid: every
// `full_attention_interval`-th layer is gated attention (attn_q gives each
// head's query and an output gate; per-head QK-norm; partial NEOX RoPE over
// rope.dimension_count dims - IMROPE's sections coincide for text), the
// others gated DeltaNets (q, k, v through a causal convolution and SiLU, q
// and k L2-normalised, the delta rule with a per-head decay, output
// RMSNorm times silu(z)). Dense SwiGLU FFNs after post_attention_norm, the
// output tied unless present.
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchQwen35 = {"qwen35", RopeType::kNeox, /*qkv_bias=*/false, QkNorm::kPerHead,
                                     /*requires_experts=*/false, /*norm_topk=*/false, /*shared_expert=*/false,
                                     /*expert_ff_key=*/true, /*output_required=*/false, /*attention_n_embd=*/false,
                                     LayerPattern::kFullAttentionInterval, "output_norm.weight",
                                     "post_attention_norm.weight", /*gated_attention=*/true};
}
