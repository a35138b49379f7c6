#include "dispatch/router.h"

#include <algorithm>
#include <limits>

#include "dispatch/perf_model.h"
#include "engines/engine.h"

namespace ork {

const char* route_name(Route r) {
  switch (r) {
    case Route::kCpu: return "cpu";
    case Route::kNpu: return "npu";
    case Route::kSplit: return "split";
    case Route::kOverlay: return "overlay";
    case Route::kRoutes: break;
  }
  return "?";
}

std::string_view overlay_role(const char* name) {
  if (name == nullptr) return "?";
  std::string_view r(name);
  if (r.starts_with("blk.")) {
    const size_t dot = r.find('.', 4);
    if (dot != std::string_view::npos) r.remove_prefix(dot + 1);
  }
  // An expert's view: "<tensor>.e<index>".
  if (const size_t e = r.rfind(".e"); e != std::string_view::npos && e + 2 < r.size() &&
                                      r.find_first_not_of("0123456789", e + 2) == std::string_view::npos) {
    r.remove_suffix(r.size() - e);
  }
  if (r.ends_with(".weight")) r.remove_suffix(7);
  return r.empty() ? "?" : r;
}

OverlayRoleCount& DispatchStats::role(std::string_view name) {
  for (OverlayRoleCount& r : roles) {
    if (r.role == name) return r;
  }
  return roles.emplace_back(OverlayRoleCount{std::string(name)});
}

void DispatchStats::add(const DispatchStats& o) {
  for (const OverlayRoleCount& r : o.roles) {
    OverlayRoleCount& mine = role(r.role);
    mine.candidates += r.candidates;
    mine.hits += r.hits;
  }
  for (int r = 0; r < kRouteCount; ++r) {
    decode[static_cast<size_t>(r)] += o.decode[static_cast<size_t>(r)];
    prefill[static_cast<size_t>(r)] += o.prefill[static_cast<size_t>(r)];
  }
  npu_refused += o.npu_refused;
  overlay_hits += o.overlay_hits;
  overlay_misses += o.overlay_misses;
  overlay_skipped += o.overlay_skipped;
  overlay_over_budget += o.overlay_over_budget;
  overlay_host_us += o.overlay_host_us;
  npu_rows += o.npu_rows;
  cpu_rows += o.cpu_rows;
  modeled_cpu_us += o.modeled_cpu_us;
  modeled_npu_us += o.modeled_npu_us;
  modeled_routed_us += o.modeled_routed_us;
  for (const Choice& c : o.choices) {
    auto it = std::find_if(choices.begin(), choices.end(), [&](const Choice& x) {
      return x.tier == c.tier && x.m == c.m && x.k == c.k && x.n == c.n && x.route == c.route;
    });
    if (it == choices.end()) {
      choices.push_back(c);
    } else {
      it->count += c.count;
    }
  }
}

void DispatchStats::record(const MatmulOp& op, const PrefillChoice& c) {
  for (Choice& x : choices) {
    if (x.tier == op.tier && x.m == op.m && x.k == op.k && x.n == op.n && x.route == c.route) {
      ++x.count;
      return;
    }
  }
  choices.push_back({op.tier, op.m, op.k, op.n, c.npu_rows, c.route, c.cpu_us, c.npu_us, c.routed_us, 1});
}

PrefillChoice choose_prefill(const PerfModel& model, const Engine* npu, const MatmulOp& op, bool allow_split,
                             int64_t granule) {
  PrefillChoice c;
  c.cpu_us = model.cpu_us(op);
  c.routed_us = c.cpu_us;
  c.npu_us = npu != nullptr && npu->supports(op).ok ? model.npu_us(*npu, op) : -1.0;
  if (c.npu_us < 0) {
    c.npu_us = c.cpu_us;  // what "NPU-only" costs for a matmul it cannot read: the CPU's
    return c;
  }
  if (c.npu_us < c.cpu_us) {
    c.route = Route::kNpu;
    c.npu_rows = op.n;
    c.routed_us = c.npu_us;
  }
  if (!allow_split || op.n < 2 * granule) return c;
  // Rows to the NPU, in granules: the CPU's share shrinks as the NPU's
  // grows, so the time both take is lowest where they cross.
  auto time_of = [&](int64_t npu_rows, double* cpu_part, double* npu_part) {
    MatmulOp a = op, b = op;
    a.n = op.n - npu_rows;
    b.n = npu_rows;
    *cpu_part = model.cpu_us(a);
    *npu_part = model.npu_us(*npu, b);
    return *npu_part < 0 ? std::numeric_limits<double>::infinity() : std::max(*cpu_part, *npu_part);
  };
  int64_t lo = 1, hi = op.n / granule - 1;  // granules to the NPU; both engines get some rows
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    double cp, np;
    time_of(mid * granule, &cp, &np);
    if (np < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (int64_t g : {lo - 1, lo}) {
    if (g < 1 || g * granule >= op.n) continue;
    double cp, np;
    const double t = time_of(g * granule, &cp, &np);
    if (t < c.routed_us) {
      c.route = Route::kSplit;
      c.npu_rows = g * granule;
      c.routed_us = t;
    }
  }
  return c;
}

}  // namespace ork
