// The routing rules of the dispatcher (DESIGN section 5), kept apart from
// the mechanics so they can be read - and tested - on their own.
//
//   M = 1:  the CPU computes every matmul; the NPU is never a join. A weight
//           stored i8s (the sensitive set) is overlaid when the overlay is on
//           and the NPU is free: the CPU reads its high plane, the NPU
//           recomputes it at W8A8.
//   M > 1:  for each matmul the performance model predicts the CPU's time,
//           the NPU's, and the best row split (rows to the NPU sized so both
//           finish together); the fastest wins. A tier the NPU cannot read
//           stays on the CPU.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "quant/tier.h"

namespace ork {

class Engine;
class PerfModel;
struct MatmulOp;

enum class Route { kCpu, kNpu, kSplit, kOverlay, kRoutes };
inline constexpr int kRouteCount = static_cast<int>(Route::kRoutes);
const char* route_name(Route r);

// How the overlay decides whether the NPU's result was ready in time.
enum class OverlayClock {
  kWall,     // its fence has signalled when the consumer asks (real time; vnpu paced)
  kVirtual,  // the profile's modeled NPU time against the profile's modeled
             // CPU time up to the consumer: deterministic, machine-independent
  kForced,   // a fixed share of jobs hit (hit_rate), chosen by a seeded hash:
             // for KLD against hit rate
};

struct DispatchOptions {
  bool overlay = true;             // overlay i8s weights at M = 1 when the NPU is free
  bool prefill = true;             // route M > 1 matmuls by the performance model
  bool split = true;               // allow row splits at M > 1
  OverlayClock clock = OverlayClock::kWall;
  double hit_rate = 1.0;           // kForced: the share of overlay jobs that hit
  // kForced: a share of its own for each tensor role listed (overlay_role:
  // "attn_v", "ffn_down_exps"...); a role not listed hits at hit_rate. To
  // put on one model the per-role rates the virtual clock gives another.
  std::vector<std::pair<std::string, double>> role_hit_rates;
  int max_in_flight = 8;           // overlay jobs the NPU may hold at once
  // The share of decode's CPU time that the overlay's host work (opening
  // jobs, taking results: on the critical path) may take, as measured while
  // it runs; wall clock only (the measurement clocks open what the device
  // model allows, so their hit rates stay reproducible). >= 1: no limit.
  double overlay_budget = 0.01;
  const PerfModel* model = nullptr;  // null: the built-in default (perf_model.h)
  double device_cpu_gbps = 0;      // the device's own CPU read rate, for the virtual clock (profile cpu_gbps)
  // For tests and measurements: every prefill matmul the NPU can read goes
  // this way whatever the model says (kSplit: split_fraction of its rows,
  // rounded to 32, to the NPU).
  std::optional<Route> force_prefill;
  double split_fraction = 0.5;
};

// A tensor's role in its layer, as the overlay's per-role counts name it:
// its name without the block prefix, the ".weight" suffix and an expert's
// index ("blk.3.ffn_down_exps.weight.e5" -> "ffn_down_exps"); "?" without
// a name. A view into `name`.
std::string_view overlay_role(const char* name);

// The overlay's jobs of one tensor role: how many decode matmuls were
// candidates (i8s at M = 1), and how many took the NPU's result.
struct OverlayRoleCount {
  std::string role;
  uint64_t candidates = 0, hits = 0;
  double coverage() const { return candidates > 0 ? static_cast<double>(hits) / static_cast<double>(candidates) : 0.0; }
};

// Every decision, counted. decode = M 1, prefill = M > 1.
struct DispatchStats {
  std::array<uint64_t, kRouteCount> decode{}, prefill{};
  uint64_t npu_refused = 0;     // M > 1 matmuls the NPU cannot read (tier or shape): CPU
  uint64_t overlay_hits = 0;    // the NPU's int8 result was used
  uint64_t overlay_misses = 0;  // it was not ready: the CPU's int4 result was
  uint64_t overlay_skipped = 0; // i8s at M = 1 but the NPU was busy or predicted late: CPU alone
  uint64_t overlay_over_budget = 0;  // i8s at M = 1, not opened: the overlay's host time was spent
  double overlay_host_us = 0;   // wall clock: the host time its opens and resolves took (measured)
  uint64_t npu_rows = 0, cpu_rows = 0;  // output rows of the split matmuls, by engine
  double modeled_cpu_us = 0;    // prefill: what CPU-only would have cost (model)
  double modeled_npu_us = 0;    //          what NPU-only would have (model; CPU for what it cannot read)
  double modeled_routed_us = 0; //          what the chosen routes cost (model)
  // Each distinct prefill shape's choice (tier, M, K, N), and how often.
  struct Choice {
    Tier tier;
    int64_t m, k, n, npu_rows;
    Route route;
    double cpu_us, npu_us, routed_us;
    uint64_t count;
  };
  std::vector<Choice> choices;
  // By tensor role, counted with a measurement clock (virtual or forced)
  // only: the share of each role's matmuls that had the NPU's int8 result.
  std::vector<OverlayRoleCount> roles;
  OverlayRoleCount& role(std::string_view name);
  void record(const MatmulOp& op, const struct PrefillChoice& c);
  double hit_rate() const {
    const uint64_t n = overlay_hits + overlay_misses;
    return n > 0 ? static_cast<double>(overlay_hits) / static_cast<double>(n) : 0.0;
  }
  void add(const DispatchStats& o);
};

// A prefill matmul's route and, for a split, how many of its rows the NPU
// takes (in multiples of `granule`), from the model's predictions.
struct PrefillChoice {
  Route route = Route::kCpu;
  int64_t npu_rows = 0;
  double cpu_us = 0, npu_us = 0, routed_us = 0;
};
// `npu` null or unable to read the op: the CPU.
PrefillChoice choose_prefill(const PerfModel& model, const Engine* npu, const MatmulOp& op, bool allow_split,
                             int64_t granule = 32);

}  // namespace ork
