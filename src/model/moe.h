// Mixture-of-experts routing, as the llama.cpp families define it: a gate
// per expert from its router logit (in f32) - a softmax over all experts,
// or an independent sigmoid each - the top k by gate plus an optional
// selection bias (ties to the lower expert index), and optionally their
// gates renormalised to sum to 1.
#pragma once

#include <cstdint>

#include "model/config.h"

namespace ork {

struct Routing {
  Gating gating = Gating::kSoftmax;
  bool renormalise = false;
  // n_expert values added to the gates to choose the top k; the weights
  // are the gates themselves (null: none).
  const float* selection_bias = nullptr;
};

// One token: ids[0..k) and weights[0..k) of the chosen experts, best first.
void route_token(const float* logits, int n_expert, int k, const Routing& routing, int32_t* ids, float* weights);

// Softmax gates, no bias.
inline void route_token(const float* logits, int n_expert, int k, bool renormalise, int32_t* ids, float* weights) {
  route_token(logits, n_expert, k, Routing{Gating::kSoftmax, renormalise, nullptr}, ids, weights);
}

}  // namespace ork
