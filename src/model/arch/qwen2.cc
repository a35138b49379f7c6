// qwen2: Qwen 1.5 / 2 / 2.5 dense. NEOX RoPE and a bias on q, k and v.
#include "model/config.h"

namespace ork {
extern const ArchSpec kArchQwen2 = {"qwen2", ref::RopeType::kNeox, /*qkv_bias=*/true, /*qk_norm=*/false};
}
