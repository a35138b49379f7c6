// llama: Llama 1/2/3, TinyStories, Mistral-style dense models.
// RoPE on adjacent pairs (the converter permutes Q/K rows to match).
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchLlama = {"llama", ref::RopeType::kNorm, /*qkv_bias=*/false, /*qk_norm=*/false};
}
