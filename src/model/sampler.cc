#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace ork {

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {}

void Sampler::accept(int32_t token) {
  if (params_.repeat_last_n <= 0) return;
  recent_.push_back(token);
  while (recent_.size() > static_cast<size_t>(params_.repeat_last_n)) recent_.pop_front();
}

namespace {

// Softmax of the candidates' logits into p (candidates sorted or not).
template <typename C>
void normalize(std::vector<C>& cands) {
  float max = -INFINITY;
  for (const auto& c : cands) max = std::max(max, c.logit);
  double sum = 0;
  for (auto& c : cands) {
    c.p = std::exp(c.logit - max);
    sum += c.p;
  }
  for (auto& c : cands) c.p = static_cast<float>(c.p / sum);
}

}  // namespace

int32_t Sampler::sample(std::span<const float> logits) {
  const auto n = static_cast<int32_t>(logits.size());
  candidates_.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) candidates_[static_cast<size_t>(i)] = {i, logits[static_cast<size_t>(i)], 0.0f};

  if (params_.repeat_penalty != 1.0f && !recent_.empty()) {
    const std::unordered_set<int32_t> seen(recent_.begin(), recent_.end());
    for (int32_t id : seen) {
      if (id < 0 || id >= n) continue;
      float& l = candidates_[static_cast<size_t>(id)].logit;
      l = l > 0 ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    }
  }

  int32_t chosen;
  if (params_.temperature <= 0.0f) {
    chosen = std::max_element(candidates_.begin(), candidates_.end(),
                              [](const Candidate& a, const Candidate& b) { return a.logit < b.logit; })
                 ->id;
  } else {
    auto by_logit = [](const Candidate& a, const Candidate& b) { return a.logit > b.logit; };
    size_t keep = candidates_.size();
    if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
      keep = static_cast<size_t>(params_.top_k);
      std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<long>(keep), candidates_.end(), by_logit);
    } else {
      std::sort(candidates_.begin(), candidates_.end(), by_logit);
    }
    candidates_.resize(keep);
    normalize(candidates_);
    if (params_.top_p < 1.0f) {
      // Smallest prefix whose probability reaches top_p (at least one token).
      double cum = 0;
      size_t k = 0;
      while (k < candidates_.size()) {
        cum += candidates_[k++].p;
        if (cum >= params_.top_p) break;
      }
      candidates_.resize(k);
    }
    if (params_.min_p > 0.0f) {
      // Drop tokens less likely than min_p times the most likely one.
      const float floor = candidates_.front().p * params_.min_p;
      size_t k = 1;
      while (k < candidates_.size() && candidates_[k].p >= floor) ++k;
      candidates_.resize(k);
    }
    for (auto& c : candidates_) c.logit /= params_.temperature;
    normalize(candidates_);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    const double r = uniform(rng_);
    double cum = 0;
    chosen = candidates_.back().id;
    for (const auto& c : candidates_) {
      cum += c.p;
      if (r < cum) {
        chosen = c.id;
        break;
      }
    }
  }
  accept(chosen);
  return chosen;
}

}  // namespace ork
