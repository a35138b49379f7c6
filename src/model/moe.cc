#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ork {

void route_token(const float* logits, int n_expert, int k, bool renormalise, int32_t* ids, float* weights) {
  float max = logits[0];
  for (int e = 1; e < n_expert; ++e) max = std::max(max, logits[e]);
  thread_local std::vector<float> p;
  p.resize(static_cast<size_t>(n_expert));
  float sum = 0.0f;
  for (int e = 0; e < n_expert; ++e) {
    p[static_cast<size_t>(e)] = std::exp(logits[e] - max);
    sum += p[static_cast<size_t>(e)];
  }
  for (int e = 0; e < n_expert; ++e) p[static_cast<size_t>(e)] /= sum;
  thread_local std::vector<int32_t> order;
  order.resize(static_cast<size_t>(n_expert));
  for (int e = 0; e < n_expert; ++e) order[static_cast<size_t>(e)] = e;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    const float pa = p[static_cast<size_t>(a)], pb = p[static_cast<size_t>(b)];
    return pa > pb || (pa == pb && a < b);
  });
  float chosen = 0.0f;
  for (int j = 0; j < k; ++j) {
    ids[j] = order[static_cast<size_t>(j)];
    weights[j] = p[static_cast<size_t>(ids[j])];
    chosen += weights[j];
  }
  if (renormalise) {
    for (int j = 0; j < k; ++j) weights[j] /= chosen;
  }
}

}  // namespace ork
