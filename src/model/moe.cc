#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ork {

void route_token(const float* logits, int n_expert, int k, const Routing& routing, int32_t* ids, float* weights) {
  thread_local std::vector<float> p, chosen_by;
  p.resize(static_cast<size_t>(n_expert));
  if (routing.gating == Gating::kSigmoid) {
    for (int e = 0; e < n_expert; ++e) p[static_cast<size_t>(e)] = 1.0f / (1.0f + std::exp(-logits[e]));
  } else {
    float max = logits[0];
    for (int e = 1; e < n_expert; ++e) max = std::max(max, logits[e]);
    float sum = 0.0f;
    for (int e = 0; e < n_expert; ++e) {
      p[static_cast<size_t>(e)] = std::exp(logits[e] - max);
      sum += p[static_cast<size_t>(e)];
    }
    for (int e = 0; e < n_expert; ++e) p[static_cast<size_t>(e)] /= sum;
  }
  const std::vector<float>* rank = &p;
  if (routing.selection_bias != nullptr) {
    chosen_by.resize(static_cast<size_t>(n_expert));
    for (int e = 0; e < n_expert; ++e) chosen_by[static_cast<size_t>(e)] = p[static_cast<size_t>(e)] + routing.selection_bias[e];
    rank = &chosen_by;
  }
  thread_local std::vector<int32_t> order;
  order.resize(static_cast<size_t>(n_expert));
  for (int e = 0; e < n_expert; ++e) order[static_cast<size_t>(e)] = e;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    const float ra = (*rank)[static_cast<size_t>(a)], rb = (*rank)[static_cast<size_t>(b)];
    return ra > rb || (ra == rb && a < b);
  });
  float chosen = 0.0f;
  for (int j = 0; j < k; ++j) {
    ids[j] = order[static_cast<size_t>(j)];
    weights[j] = p[static_cast<size_t>(ids[j])];
    chosen += weights[j];
  }
  if (routing.renormalise) {
    // As llama.cpp: the sum is clamped below (sigmoid gates may all be ~0).
    chosen = std::max(chosen, 6.103515625e-5f);
    for (int j = 0; j < k; ++j) weights[j] /= chosen;
  }
}

}  // namespace ork
