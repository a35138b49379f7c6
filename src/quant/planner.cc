#include "quant/planner.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <queue>
#include <sstream>

#include "core/escape.h"

namespace ork {

Result<TierRule> parse_tier_rule(const std::string& text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return error(StatusCode::kInvalidArgument, "tier rule '{}' is not 'regex=tier' (e.g. 'ffn_down=i8')", text);
  }
  TierRule rule;
  rule.pattern = text.substr(0, eq);
  const auto tier = tier_from_name(text.substr(eq + 1));
  if (!tier) {
    return error(StatusCode::kInvalidArgument, "tier rule '{}': unknown tier '{}' ({})", text, text.substr(eq + 1),
                 tier_names());
  }
  rule.tier = *tier;
  try {
    std::regex check(rule.pattern);
  } catch (const std::regex_error& e) {
    return error(StatusCode::kInvalidArgument, "tier rule '{}': bad regex: {}", text, e.what());
  }
  return rule;
}

Result<TierMap> read_tier_map(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(StatusCode::kIo, "{}: cannot read the tier map", path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_tier_map(text, path);
}

Result<TierMap> parse_tier_map(std::string_view text, const std::string& source) {
  TierMap map;
  map.source = source;
  auto trim = [](std::string_view s) {
    const size_t a = s.find_first_not_of(" \t\r");
    const size_t b = s.find_last_not_of(" \t\r");
    return a == std::string_view::npos ? std::string_view() : s.substr(a, b - a + 1);
  };
  int n = 0;
  for (size_t at = 0; at < text.size();) {
    ++n;
    const size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return error(StatusCode::kInvalidArgument, "{}:{}: expected 'tensor = tier'", source, n);
    }
    const std::string name(trim(line.substr(0, eq)));
    const std::string tier_text(trim(line.substr(eq + 1)));
    const auto tier = tier_from_name(tier_text);
    if (name.empty() || !tier) {
      return error(StatusCode::kInvalidArgument, "{}:{}: '{}' is not 'tensor = tier' with a known tier ({})", source, n,
                   escape_text(line), tier_names());
    }
    if (const auto it = map.lines.find(name); it != map.lines.end()) {
      return error(StatusCode::kInvalidArgument, "{}:{}: tensor '{}' is already given a tier on line {}", source, n,
                   escape_text(name), it->second);
    }
    map.tiers[name] = *tier;
    map.lines[name] = n;
  }
  return map;
}

std::string format_tier_map(const std::map<std::string, Tier>& tiers) {
  std::string out;
  for (const auto& [name, tier] : tiers) out += name + " = " + std::string(tier_name(tier)) + "\n";
  return out;
}

Status apply_fixed_tiers(std::vector<PlanTensor>& tensors, const std::vector<TierRule>& rules,
                         const std::map<std::string, Tier>& map) {
  for (PlanTensor& t : tensors) {
    for (const TierRule& rule : rules) {
      if (std::regex_search(t.name, std::regex(rule.pattern))) t.fixed = rule.tier;
    }
    if (const auto it = map.find(t.name); it != map.end()) t.fixed = it->second;
    if (t.fixed && std::none_of(t.options.begin(), t.options.end(), [&](const TierOption& o) { return o.tier == *t.fixed; })) {
      return error(StatusCode::kInvalidArgument, "tensor '{}' cannot take tier {} (not measured for it)", t.name,
                   tier_name(*t.fixed));
    }
  }
  return Status::ok();
}

std::string matrix_group(const std::string& unit) {
  const size_t dot = unit.rfind(".e");
  if (dot == std::string::npos || dot + 2 == unit.size()) return unit;
  for (size_t i = dot + 2; i < unit.size(); ++i) {
    if (unit[i] < '0' || unit[i] > '9') return unit;
  }
  return unit.substr(0, dot);
}

namespace {

// A tensor's options on the lower convex hull of (bytes, error), cheapest
// first: moving along it saves less error per byte at each step.
struct Hull {
  std::vector<TierOption> steps;
  double read_share = 1.0;
};

Result<std::vector<Hull>> build_hulls(const std::vector<PlanTensor>& tensors) {
  std::vector<Hull> hulls(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PlanTensor& t = tensors[i];
    std::vector<TierOption> opts;
    if (t.fixed) {
      for (const TierOption& o : t.options) {
        if (o.tier == *t.fixed) opts.push_back(o);
      }
    } else {
      opts = t.options;
    }
    if (!(t.weight > 0.0) || !std::isfinite(t.weight)) {
      return error(StatusCode::kInvalidArgument, "tensor '{}': sensitivity weight {} is not a positive number", t.name,
                   t.weight);
    }
    if (!(t.read_share >= 0.0 && t.read_share <= 1.0)) {
      return error(StatusCode::kInvalidArgument, "tensor '{}': read share {} is not in [0, 1]", t.name, t.read_share);
    }
    hulls[i].read_share = t.read_share;
    for (TierOption& o : opts) o.error *= t.weight;
    std::sort(opts.begin(), opts.end(), [](const TierOption& a, const TierOption& b) {
      return a.bytes != b.bytes ? a.bytes < b.bytes : a.error < b.error;
    });
    std::vector<TierOption>& hull = hulls[i].steps;
    for (const TierOption& o : opts) {
      if (!hull.empty() && o.error >= hull.back().error) continue;  // more bytes, no better
      if (!hull.empty() && o.bytes == hull.back().bytes) continue;
      // Pop points that lie above the segment to the new point.
      while (hull.size() >= 2) {
        const TierOption& a = hull[hull.size() - 2];
        const TierOption& b = hull.back();
        const double slope_ab = (a.error - b.error) / static_cast<double>(b.bytes - a.bytes);
        const double slope_bo = (b.error - o.error) / static_cast<double>(o.bytes - b.bytes);
        if (slope_bo >= slope_ab) hull.pop_back();
        else break;
      }
      hull.push_back(o);
    }
    if (hull.empty()) return error(StatusCode::kInternal, "tensor '{}' has no tier options", t.name);
  }
  return hulls;
}

// Bytes and reads of the plan that takes every tensor's cheapest step.
struct Totals {
  uint64_t bytes = 0;
  double read = 0;
};
Totals cheapest_totals(const std::vector<Hull>& hulls) {
  Totals t;
  for (const Hull& h : hulls) {
    t.bytes += h.steps.front().bytes;
    t.read += h.read_share * static_cast<double>(h.steps.front().bytes);
  }
  return t;
}

struct Greedy {
  std::vector<size_t> at;  // each tensor's step on its hull
  double error = 0;
  double read = 0;
  bool read_bound = false;  // a step within the byte budget was passed over for the read budget
};

// From every tensor's cheapest step, the next step that saves the most
// error per unit of price, a byte costing 1 + price_of_read * read_share,
// while both budgets hold (a step that breaks one is passed over; others
// may fit). A tensor's price is its bytes times a constant of its own, so
// its hull is the same whatever the price of a read.
Greedy run_greedy(const std::vector<Hull>& hulls, uint64_t budget, double read_budget, double price_of_read) {
  Greedy g;
  g.at.assign(hulls.size(), 0);
  const Totals start = cheapest_totals(hulls);
  uint64_t used = start.bytes;
  g.read = start.read;
  struct Step {
    double gain_per_price;
    size_t tensor;
    bool operator<(const Step& o) const { return gain_per_price < o.gain_per_price; }
  };
  std::priority_queue<Step> queue;
  auto push_next = [&](size_t i) {
    const Hull& h = hulls[i];
    const size_t at = g.at[i];
    if (at + 1 >= h.steps.size()) return;
    const TierOption& a = h.steps[at];
    const TierOption& b = h.steps[at + 1];
    const double price = static_cast<double>(b.bytes - a.bytes) * (1.0 + price_of_read * h.read_share);
    queue.push({(a.error - b.error) / price, i});
  };
  for (size_t i = 0; i < hulls.size(); ++i) push_next(i);
  while (!queue.empty()) {
    const Step s = queue.top();
    queue.pop();
    const Hull& h = hulls[s.tensor];
    const size_t at = g.at[s.tensor];
    const uint64_t extra = h.steps[at + 1].bytes - h.steps[at].bytes;
    const double extra_read = h.read_share * static_cast<double>(extra);
    if (used + extra > budget) continue;
    if (g.read + extra_read > read_budget) {
      g.read_bound = true;
      continue;
    }
    used += extra;
    g.read += extra_read;
    ++g.at[s.tensor];
    push_next(s.tensor);
  }
  for (size_t i = 0; i < hulls.size(); ++i) g.error += hulls[i].steps[g.at[i]].error;
  return g;
}

}  // namespace

Result<std::map<std::string, Tier>> plan_tiers(const std::vector<PlanTensor>& tensors, uint64_t budget) {
  return plan_tiers(tensors, budget, std::nullopt);
}

Result<std::map<std::string, Tier>> plan_tiers(const std::vector<PlanTensor>& tensors, uint64_t budget,
                                               std::optional<double> read_budget) {
  ORK_ASSIGN_OR_RETURN(const std::vector<Hull> hulls, build_hulls(tensors));
  const Totals least = cheapest_totals(hulls);
  const uint64_t used = least.bytes;
  const double read = least.read;
  if (used > budget) {
    return error(StatusCode::kInvalidArgument,
                 "the budget of {} bytes is {} bytes short of the smallest plan ({} bytes); raise --bpw/--budget or "
                 "relax --tier rules",
                 budget, used - budget, used);
  }
  if (read_budget && read > *read_budget) {
    return error(StatusCode::kInvalidArgument,
                 "the read budget of {:.0f} bytes a token is {:.0f} bytes short of the smallest plan's ({:.0f}); raise "
                 "--decode-bpw or relax --tier rules",
                 *read_budget, read - *read_budget, read);
  }
  const double reads = read_budget ? *read_budget : HUGE_VAL;
  Greedy best = run_greedy(hulls, budget, reads, 0.0);
  // Where the read budget binds, a read is priced at 2^-8 .. 2^16 of a
  // file byte in turn (eight prices an octave), and the plan that keeps the
  // least error wins: each price's plan holds both budgets, and the best
  // lies near the price at which the two bind together. (A few hundred
  // greedy passes: under a second for thousands of tensors.)
  if (best.read_bound) {
    for (int step = -8 * 8; step <= 16 * 8; ++step) {
      Greedy g = run_greedy(hulls, budget, reads, std::exp2(step / 8.0));
      if (g.error < best.error) best = std::move(g);
    }
  }
  std::map<std::string, Tier> plan;
  for (size_t i = 0; i < tensors.size(); ++i) plan[tensors[i].name] = hulls[i].steps[best.at[i]].tier;
  return plan;
}

double plan_read_bytes(const std::vector<PlanTensor>& tensors, const std::map<std::string, Tier>& plan) {
  double read = 0;
  for (const PlanTensor& t : tensors) {
    const auto it = plan.find(t.name);
    if (it == plan.end()) continue;
    for (const TierOption& o : t.options) {
      if (o.tier == it->second) {
        read += t.read_share * static_cast<double>(o.bytes);
        break;
      }
    }
  }
  return read;
}

}  // namespace ork
