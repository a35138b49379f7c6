// Mixture-of-experts routing, as the llama.cpp families define it: softmax
// over every expert's router logit (in f32), the top k by probability (ties
// to the lower expert index), and optionally their weights renormalised to
// sum to 1.
#pragma once

#include <cstdint>

namespace ork {

// One token: ids[0..k) and weights[0..k) of the chosen experts, best first.
void route_token(const float* logits, int n_expert, int k, bool renormalise, int32_t* ids, float* weights);

}  // namespace ork
