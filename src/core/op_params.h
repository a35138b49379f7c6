// Parameters of the ops an architecture chooses between, shared by the
// model (which picks them) and the engines (which run them).
#pragma once

#include <cstdint>

namespace ork {

enum class RopeType {
  kNorm,  // rotates adjacent pairs (x[2i], x[2i+1]) — llama
  kNeox,  // rotates (x[i], x[i + n_rot/2]) — qwen2, qwen3, gpt-neox
};

struct RopeParams {
  RopeType type = RopeType::kNorm;
  int n_rot = 0;              // leading dimensions rotated; the rest pass through
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;    // linear scaling: position multiplied by this
  const float* freq_factors = nullptr;  // optional per-pair divisor of the frequency (llama3 rope_freqs)
};

}  // namespace ork
