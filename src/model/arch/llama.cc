// llama: Llama 1/2/3, TinyStories, Mistral-style dense models. RoPE on
// adjacent pairs (the converter permutes Q/K rows to match). With
// llama.expert_count > 0 it is Mixtral: every FFN a mixture of SwiGLU
// experts of feed_forward_length, softmax over all experts, the top
// n_expert_used renormalised to sum 1.
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchLlama = {"llama", RopeType::kNorm, /*qkv_bias=*/false, QkNorm::kNone,
                                    /*requires_experts=*/false, /*norm_topk=*/true, /*shared_expert=*/false,
                                    /*expert_ff_key=*/false, /*output_required=*/false, /*attention_n_embd=*/false};
}
