// --npu and --trace for `ork run` and `ork bench`: builds the vnpu engine
// (static placement: prefill matmuls the device supports), and afterwards
// reports its modeled device time beside the host's wall time and writes
// the trace.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engines/npu/npu_engine.h"
#include "model/forward.h"

namespace ork::cli {

struct NpuCli {
  std::string spec;   // --npu vnpu:PROFILE[:sessions=N]...
  std::string trace;  // --trace file.json

  void add_options(CLI::App& app);
  // Builds the engine if --npu was given; an error names the bad part.
  Status start();
  npu::NpuEngine* engine() const { return engine_.get(); }
  // Modeled device time and host wall time of the NPU's jobs, labelled.
  void report(std::FILE* out, const Context::NpuStats& placement) const;
  // The same as JSON members (", \"npu\": {...}"), or "" without --npu.
  std::string json(const Context::NpuStats& placement) const;
  // Writes --trace (after the engine has drained).
  Status finish();

 private:
  std::unique_ptr<Trace> trace_data_;
  std::unique_ptr<npu::NpuEngine> engine_;
};

}  // namespace ork::cli
