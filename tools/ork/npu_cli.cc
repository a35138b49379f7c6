#include "npu_cli.h"

#include "core/output_file.h"

namespace ork::cli {

void NpuCli::add_options(CLI::App& app) {
  app.add_option("--npu", spec,
                 "Run prefill matmuls on an NPU: vnpu:PROFILE[:sessions=N][:window=MiB][:workers=N][:paced][:blocking]; "
                 "profiles rk3588, hexagon-v75, hexagon-v79 (data/npu_profiles.txt)");
  app.add_option("--trace", trace, "With --npu: write the device's trace (Chrome trace-event JSON, loads in Perfetto)");
}

Status NpuCli::start() {
  if (spec.empty()) {
    if (!trace.empty()) return error(StatusCode::kInvalidArgument, "--trace needs --npu");
    return Status::ok();
  }
  ORK_ASSIGN_OR_RETURN(npu::VnpuOptions o, npu::parse_npu_spec(spec));
  if (!trace.empty()) {
    ORK_RETURN_IF_ERROR(check_output_path(trace, {}, "--trace"));
    trace_data_ = std::make_unique<Trace>();
    o.trace = trace_data_.get();
  }
  ORK_ASSIGN_OR_RETURN(engine_, npu::NpuEngine::create(o));
  std::fprintf(stderr, "ork: npu: %s (%s: %.0f int8 TOPS, %.0f KiB VTCM per session, %.1f GiB window; %s)\n",
               engine_->name().c_str(), o.profile.name.c_str(), o.profile.int8_tops,
               static_cast<double>(o.profile.vtcm_bytes) / 1024,
               static_cast<double>(o.window_bytes > 0 ? o.window_bytes : o.profile.window_bytes) / (1 << 30),
               o.paced ? "paced" : "not paced");
  return Status::ok();
}

void NpuCli::report(std::FILE* out, const Context::NpuStats& placement) const {
  if (!engine_) return;
  const npu::NpuEngine::Stats s = engine_->stats();
  std::fprintf(out, "npu              %s: %llu matmuls placed (%llu refused: tier or shape, %llu failed), %llu programs\n",
               engine_->name().c_str(), static_cast<unsigned long long>(placement.matmuls),
               static_cast<unsigned long long>(placement.refused), static_cast<unsigned long long>(placement.failed),
               static_cast<unsigned long long>(s.program_cache_entries));
  std::fprintf(out, "npu time         modeled device %.2f ms (from the profile, not measured); host wall %.2f ms (measured, vnpu on this CPU)\n",
               s.modeled_device_us / 1e3, s.host_wall_us / 1e3);
  std::fprintf(out, "npu window       %llu maps, %llu evictions\n", static_cast<unsigned long long>(s.maps),
               static_cast<unsigned long long>(s.evictions));
  if (placement.matmuls == 0 && placement.refused > 0) {
    std::fprintf(out, "npu note         nothing ran on the NPU: its datapath reads orkpack i8, i8s (W8A8) and i4 (W4A4) "
                      "tensors; pack with e.g. `ork pack --uniform i8`\n");
  }
}

std::string NpuCli::json(const Context::NpuStats& placement) const {
  if (!engine_) return {};
  const npu::NpuEngine::Stats s = engine_->stats();
  return fmt::format(", \"npu\": {{\"device\": \"{}\", \"matmuls\": {}, \"refused\": {}, \"failed\": {}, "
                     "\"modeled_device_ms\": {:.3f}, \"modeled\": true, \"host_wall_ms\": {:.3f}, \"maps\": {}, \"evictions\": {}}}",
                     engine_->name(), placement.matmuls, placement.refused, placement.failed, s.modeled_device_us / 1e3,
                     s.host_wall_us / 1e3, s.maps, s.evictions);
}

Status NpuCli::finish() {
  if (!trace_data_) return Status::ok();
  engine_.reset();  // drain the device first
  ORK_RETURN_IF_ERROR(trace_data_->write_json(trace));
  std::fprintf(stderr, "ork: npu trace: %zu events written to %s\n", trace_data_->events().size(), trace.c_str());
  return Status::ok();
}

}  // namespace ork::cli
