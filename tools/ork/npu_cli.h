// --npu, the dispatcher's options and --trace for `ork run` and `ork bench`:
// builds the vnpu engine and the performance model the dispatcher routes
// by, attaches both (and the trace) to a Context, and afterwards reports
// every routing decision, the overlay's hit rate, the modeled device time
// beside the host's wall time, and writes the trace.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/trace.h"
#include "dispatch/perf_model.h"
#include "engines/npu/npu_engine.h"
#include "model/forward.h"

namespace ork::cli {

// The overlay's counts by tensor role as a JSON object ({} without a
// measurement clock).
std::string roles_json(const DispatchStats& s);

struct NpuCli {
  std::string spec;   // --npu vnpu:PROFILE[:sessions=N]...
  std::string trace;  // --trace file.json
  bool no_overlay = false, no_split = false;
  std::string prefill = "model";
  std::string clock = "wall";
  std::string hit_rate;  // --overlay-hit-rate: "R" or "ROLE=R,...[,*=R]"
  double overlay_budget = DispatchOptions().overlay_budget;

  void add_options(CLI::App& app);
  // Builds the engine and the model if --npu was given; an error names the
  // bad part.
  Status start();
  // --npu with a model whose experts are read from disk: not yet (the
  // device would read experts the cache may move). An error naming both.
  Status check_model(const Model& model) const;
  npu::NpuEngine* engine() const { return engine_.get(); }
  // Gives a Context the engine, the dispatcher's options and the trace.
  void attach(Context& ctx) const;
  // Routing decisions, the overlay, the device's modeled time and the
  // host's wall time, labelled.
  // `config`, when given, says what stays on the CPU whatever the routing
  // (a hybrid model's short convolutions).
  void report(std::FILE* out, const DispatchStats& decode, const DispatchStats& prefill,
              const ModelConfig* config = nullptr) const;
  // The same as JSON members (", \"npu\": {...}"), or "" without --npu.
  std::string json(const DispatchStats& decode, const DispatchStats& prefill) const;
  const PerfModel* model() const { return model_.get(); }
  // Writes --trace (after the engine has drained).
  Status finish();
  // The device's counters from here on: report and json leave out what
  // ran before (a benchmark's untimed warm-up).
  void restart_counts();

 private:
  // The engine's counters since restart_counts().
  npu::NpuEngine::Stats counted() const;
  npu::NpuEngine::Stats base_;
  std::unique_ptr<Trace> trace_data_;
  std::unique_ptr<npu::NpuEngine> engine_;
  std::unique_ptr<PerfModel> model_;
  DispatchOptions options_;
};

}  // namespace ork::cli
