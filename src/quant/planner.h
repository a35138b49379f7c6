// The tier planner: for every quantizable tensor, the importance-weighted
// error and the bytes of each candidate tier; then the assignment that
// minimises total error under a byte budget (greedy on the lower convex
// hull of each tensor's (bytes, error) options, by error saved per byte),
// after fixed assignments from rules and tier maps.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "ork/status.h"
#include "quant/tier.h"

namespace ork {

struct TierOption {
  Tier tier;
  uint64_t bytes;  // planes + scales
  double error;    // sum over rows and columns of importance * squared error
};

struct PlanTensor {
  std::string name;
  uint64_t params = 0;
  std::vector<TierOption> options;   // the candidate tiers, measured
  std::optional<Tier> fixed;         // set by a rule or a tier map
  // What a unit of this tensor's error costs the model, relative to the
  // others' (measured sensitivity; 1 for all when unmeasured): the plan
  // minimises the sum of weight * error.
  double weight = 1.0;
  // The share of decoded tokens that read this tensor: a MoE's routed
  // expert experts-used / experts (on average), the token embedding one
  // row of its rows, any other 1. Weighs its bytes in a read budget.
  double read_share = 1.0;
};

// The name a packing unit is measured under for sensitivity: a Mixture-of-
// Experts unit "<tensor>.e<i>" under its 3-D tensor's, any other its own.
std::string matrix_group(const std::string& unit);

struct TierRule {
  std::string pattern;  // ECMAScript regex, searched in the tensor name
  Tier tier;
};

// Parses "regex=tier" (as given to --tier).
Result<TierRule> parse_tier_rule(const std::string& text);

// A tier map as read from a file: each tensor's tier and the line that set
// it, so that a check against the model can name the line.
struct TierMap {
  std::string source;  // the file, for messages
  std::map<std::string, Tier> tiers;
  std::map<std::string, int> lines;
  bool empty() const { return tiers.empty(); }
};
// Reads a tier map: one "tensor = tier" per line; '#' starts a comment. A
// tensor named twice is an error naming both lines.
Result<TierMap> read_tier_map(const std::string& path);
// The same from text already in memory; `source` names it in messages.
Result<TierMap> parse_tier_map(std::string_view text, const std::string& source);
std::string format_tier_map(const std::map<std::string, Tier>& tiers);

// Applies rules (later rules win) and a map (wins over rules) to `fixed`.
Status apply_fixed_tiers(std::vector<PlanTensor>& tensors, const std::vector<TierRule>& rules,
                         const std::map<std::string, Tier>& map);

// Chooses a tier for every tensor so that the sum of chosen bytes is at most
// `budget_bytes` and the summed error is as small as the greedy finds.
// Fails, saying by how much, if even the cheapest choice does not fit.
Result<std::map<std::string, Tier>> plan_tiers(const std::vector<PlanTensor>& tensors, uint64_t budget_bytes);

// The same under a second budget as well: the bytes a decoded token reads,
// each tensor's bytes times its read_share, at most `read_budget`. Where
// that binds, bytes are priced by what they cost decode too, so bits go
// where a token reads them least often (a MoE's routed experts). Without
// it, or where it does not bind, the plan is plan_tiers' above.
Result<std::map<std::string, Tier>> plan_tiers(const std::vector<PlanTensor>& tensors, uint64_t budget_bytes,
                                               std::optional<double> read_budget);

// The bytes a decoded token reads of a plan: each tensor's chosen bytes
// times its read_share.
double plan_read_bytes(const std::vector<PlanTensor>& tensors, const std::map<std::string, Tier>& plan);

}  // namespace ork
