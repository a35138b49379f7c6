// What `ork run --stats` and `ork bench` say of a model whose routed experts
// are read from disk (Model::expert_cache): the cache, and over a span of
// decoded tokens its hit rate, the bytes read from disk per token, the
// disk's read rate and the time decode stalled on reads.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "model/expert_cache.h"

namespace ork::cli {

// `after` less `before` (counts and times; the cache's shape from `after`).
ExpertCacheStats expert_stats_since(const ExpertCacheStats& after, const ExpertCacheStats& before);
// `sum` plus the counts and times of `d` (the cache's shape from `d`).
void add_expert_stats(ExpertCacheStats& sum, const ExpertCacheStats& d);
// One line: "ork: experts: ..." over `tokens` tokens (what `what` names).
void print_expert_stats(std::FILE* out, const char* what, const ExpertCacheStats& s, uint64_t tokens);
// The same as a JSON object (without the per-token figures when tokens is 0).
std::string expert_stats_json(const ExpertCacheStats& s, uint64_t tokens);

}  // namespace ork::cli
