#include "model/sensitivity.h"

#include <string_view>
#include <utility>

#include "model/perplexity.h"
#include "quant/planner.h"

namespace ork {

Result<std::map<std::string, double>> measure_sensitivity(Model& model, const Model& probe,
                                                          const std::vector<int32_t>& tokens, int32_t bos,
                                                          const SensitivityOptions& options,
                                                          const std::function<void(int, int)>& progress) {
  std::map<std::string, const WeightView*> replacement;
  for (const WeightView* v : probe.matrix_views()) replacement.emplace(v->name, v);
  // Each group's views, in the order they appear (the tied output matrix
  // shares the embedding's name, so it moves with it).
  std::vector<std::pair<std::string, std::vector<WeightView*>>> groups;
  std::map<std::string, size_t> index;
  for (WeightView* v : model.mutable_matrix_views()) {
    const std::string group = matrix_group(v->name);
    if (options.skip && options.skip(group)) continue;
    const auto it = replacement.find(v->name);
    if (it == replacement.end()) {
      return error(StatusCode::kInvalidArgument, "sensitivity: {} has no matrix '{}'", probe.path(), v->name);
    }
    if (it->second->rows != v->rows || it->second->cols != v->cols) {
      return error(StatusCode::kInvalidArgument, "sensitivity: matrix '{}' is {} x {} in {} but {} x {} in {}", v->name,
                   v->rows, v->cols, model.path(), it->second->rows, it->second->cols, probe.path());
    }
    auto [at, added] = index.emplace(group, groups.size());
    if (added) groups.push_back({group, {}});
    groups[at->second].second.push_back(v);
  }

  PerplexityOptions po;
  po.n_ctx = options.n_ctx;
  po.max_chunks = options.chunks;
  po.threads = options.threads;
  std::vector<WindowScores> base;
  ORK_RETURN_IF_ERROR(measure_quality(model, tokens, bos, po, nullptr, nullptr, &base, nullptr).status());

  std::map<std::string, double> out;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<WeightView> saved;
    for (WeightView* v : groups[g].second) {
      saved.push_back(*v);
      *v = *replacement.at(v->name);
    }
    auto stats = measure_quality(model, tokens, bos, po, nullptr, &base, nullptr, nullptr);
    for (size_t i = 0; i < saved.size(); ++i) *groups[g].second[i] = saved[i];
    if (!stats.is_ok()) return error(stats.status().code(), "sensitivity of '{}': {}", groups[g].first, stats.status().message());
    out[groups[g].first] = stats->kld.value;
    if (progress) progress(static_cast<int>(g + 1), static_cast<int>(groups.size()));
  }
  return out;
}

}  // namespace ork
