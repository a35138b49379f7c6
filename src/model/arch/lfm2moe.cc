// lfm2moe: LFM2-MoE (LFM2-8B-A1B). lfm2's layers, with the FFNs after
// `leading_dense_block_count` dense ones a mixture of SwiGLU experts of
// expert_feed_forward_length: sigmoid gates (`expert_gating_func` 2), the
// top k chosen by gate + exp_probs_b (a selection bias that does not enter
// the weights), their gates renormalised to sum 1.
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchLfm2Moe = {"lfm2moe", RopeType::kNeox, /*qkv_bias=*/false, QkNorm::kPerHead,
                                      /*requires_experts=*/true, /*norm_topk=*/true, /*shared_expert=*/false,
                                      /*expert_ff_key=*/true, /*output_required=*/false, /*attention_n_embd=*/true,
                                      LayerPattern::kKvHeadsZeroConv, "token_embd_norm.weight"};
}
