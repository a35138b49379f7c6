#include "npu_cli.h"

#include "commands.h"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "core/output_file.h"
#include "core/thread_pool.h"
#include "load_model.h"
#include "text_input.h"

namespace ork::cli {

void NpuCli::add_options(CLI::App& app) {
  CLI::Option* npu = app.add_option("--npu", spec,
                 "An NPU beside the CPU, routed to by the dispatcher: vnpu:PROFILE[:sessions=N][:window=MiB][:workers=N]"
                 "[:paced][:blocking][:timing]; profiles rk3588, hexagon-v75, hexagon-v79 (data/npu_profiles.txt). "
                 "paced: fences signal at the profile's modeled time; timing: the device models its time but does "
                 "no arithmetic on this machine's cores (results are not valid). A float GGUF is packed for the "
                 "device first (kept in the cache, as `ork pack --npu PROFILE` would, uncalibrated)")
      ->each([](const std::string& s) {
        // Before the model loads: a float GGUF is packed for this device.
        auto o = npu::parse_npu_spec(s);
        set_convert_npu_profile(o.is_ok() ? o->profile.name : std::string());
      });
  // The options below mean something only beside --npu: given without it,
  // CLI11 says so (they were silently ignored).
  app.add_flag("--no-overlay", no_overlay, "With --npu: no int8 overlay of i8s tensors in decode (CPU alone at M=1)")
      ->needs(npu);
  app.add_flag("--no-split", no_split, "With --npu: no row splits between CPU and NPU in prefill")->needs(npu);
  app.add_option("--npu-prefill", prefill,
                 "With --npu, where prefill's matmuls go: model (where the performance model predicts they are "
                 "fastest), cpu, npu (every one the NPU reads), split (half their rows to the NPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"model", "cpu", "npu", "split"}))
      ->needs(npu);
  app.add_option("--overlay-clock", clock,
                 "When the overlay's NPU result counts as ready: wall (its fence has signalled), virtual (the "
                 "profile's modeled NPU time against its modeled CPU time: deterministic)")
      ->capture_default_str()
      ->check(CLI::IsMember({"wall", "virtual"}))
      ->needs(npu);
  app.add_option("--overlay-budget", overlay_budget,
                 "The share of decode's time the overlay's host work (opening NPU jobs, taking their results, on "
                 "the critical path) may take, measured as it runs; jobs past it are not opened (wall clock only; "
                 "1: no limit)")
      ->capture_default_str()
      ->check(number_in(0, 1))
      ->needs(npu);
  app.add_option("--overlay-hit-rate", hit_rate,
                 "Use the NPU's result for this share of overlay jobs (seeded, deterministic): KLD against hit rate. "
                 "R for every job, or a share per tensor role, ROLE=R,... (roles as the virtual clock's report names "
                 "them: attn_v, attn_output, ffn_down, ffn_down_exps; *=R for the roles not listed, else 0)")
      ->needs(npu);
  app.add_option("--trace", trace,
                 "Write a Perfetto trace (Chrome trace-event JSON): the CPU's phases, the dispatcher's decisions and "
                 "the NPU's DMA, compute and fences, each on its own track");
}

Status NpuCli::check_model(const Model& model) const {
  if (spec.empty() || model.expert_cache() == nullptr) return Status::ok();
  return error(StatusCode::kUnsupported,
               "--npu {}: {}'s routed experts are read from disk into an expert cache (it does not fit in memory, or "
               "--mem), and that runs on the CPU alone for now; give more memory or leave out --npu",
               spec, model.path());
}

namespace {

Status parse_hit_rates(const std::string& text, DispatchOptions* o) {
  auto share = [&](std::string_view v) -> Result<double> {
    double r = -1;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), r);
    if (ec != std::errc() || end != v.data() + v.size() || !(r >= 0 && r <= 1)) {
      return error(StatusCode::kInvalidArgument, "--overlay-hit-rate {}: '{}' is not a share from 0 to 1", text, v);
    }
    return r;
  };
  o->role_hit_rates.clear();
  if (text.find('=') == std::string::npos) {
    ORK_ASSIGN_OR_RETURN(o->hit_rate, share(text));
    return Status::ok();
  }
  o->hit_rate = 0;  // a role not listed, unless "*=R" says otherwise
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return error(StatusCode::kInvalidArgument, "--overlay-hit-rate {}: '{}' is not ROLE=R", text, item);
    }
    ORK_ASSIGN_OR_RETURN(const double r, share(item.substr(eq + 1)));
    if (item.substr(0, eq) == "*") o->hit_rate = r;
    else o->role_hit_rates.emplace_back(std::string(item.substr(0, eq)), r);
  }
  return Status::ok();
}

}  // namespace

Status NpuCli::start() {
  if (!trace.empty()) {
    ORK_RETURN_IF_ERROR(check_output_path(trace, {}, "--trace"));
    trace_data_ = std::make_unique<Trace>();
  }
  if (spec.empty()) return Status::ok();
  ORK_ASSIGN_OR_RETURN(npu::VnpuOptions o, npu::parse_npu_spec(spec));
  o.trace = trace_data_.get();
  ORK_ASSIGN_OR_RETURN(engine_, npu::NpuEngine::create(o));
  std::fprintf(stderr, "ork: npu: %s (%s: %.0f int8 TOPS, %.0f KiB VTCM per session, %.1f GiB window; %s)\n",
               engine_->name().c_str(), o.profile.name.c_str(), o.profile.int8_tops,
               static_cast<double>(o.profile.vtcm_bytes) / 1024,
               static_cast<double>(o.window_bytes > 0 ? o.window_bytes : o.profile.window_bytes) / (1 << 30),
               o.paced ? "paced" : "not paced");
  if (prefill == "model") {
    // Routing by the model needs this machine's rates: measured once, cached.
    std::string note;
    ORK_ASSIGN_OR_RETURN(PerfModel m, PerfModel::cached_or_calibrate(ThreadPool::global(), &note, [](int d, int t) {
      progress_bar("calibrate", d, t);
    }));
    std::fprintf(stderr, "ork: %s\n", note.c_str());
    model_ = std::make_unique<PerfModel>(std::move(m));
  } else {
    model_ = std::make_unique<PerfModel>(PerfModel::defaults(ThreadPool::global().size()));
  }
  options_.overlay = !no_overlay;
  options_.split = !no_split;
  options_.prefill = prefill != "cpu";
  if (prefill == "npu") options_.force_prefill = Route::kNpu;
  if (prefill == "split") options_.force_prefill = Route::kSplit;
  options_.clock = !hit_rate.empty() ? OverlayClock::kForced : clock == "virtual" ? OverlayClock::kVirtual : OverlayClock::kWall;
  if (!hit_rate.empty()) ORK_RETURN_IF_ERROR(parse_hit_rates(hit_rate, &options_));
  options_.overlay_budget = overlay_budget;
  options_.model = model_.get();
  options_.device_cpu_gbps = o.profile.cpu_gbps;
  return Status::ok();
}

void NpuCli::attach(Context& ctx) const {
  ctx.set_trace(trace_data_.get());
  if (engine_) ctx.set_npu(engine_.get(), options_);
}

namespace {

std::string routes(const std::array<uint64_t, kRouteCount>& r) {
  std::string out;
  for (int i = 0; i < kRouteCount; ++i) {
    out += fmt::format("{}{} {}", i ? ", " : "", r[static_cast<size_t>(i)], route_name(static_cast<Route>(i)));
  }
  return out;
}

std::string routes_json(const std::array<uint64_t, kRouteCount>& r) {
  std::string out = "{";
  for (int i = 0; i < kRouteCount; ++i) {
    out += fmt::format("{}\"{}\": {}", i ? ", " : "", route_name(static_cast<Route>(i)), r[static_cast<size_t>(i)]);
  }
  return out + "}";
}

}  // namespace

std::string roles_json(const DispatchStats& s) {
  std::string out = "{";
  for (const OverlayRoleCount& r : s.roles) {
    out += fmt::format("{}\"{}\": {{\"candidates\": {}, \"hits\": {}, \"coverage\": {:.6f}}}", out.size() > 1 ? ", " : "",
                       r.role, r.candidates, r.hits, r.coverage());
  }
  return out + "}";
}

namespace {

const char* clock_name(const DispatchOptions& o) {
  return o.clock == OverlayClock::kForced ? "forced" : o.clock == OverlayClock::kVirtual ? "virtual" : "wall";
}

}  // namespace

void NpuCli::report(std::FILE* out, const DispatchStats& decode, const DispatchStats& prefill_stats,
                    const ModelConfig* config) const {
  if (!engine_) return;
  const npu::NpuEngine::Stats s = counted();
  std::fprintf(out, "npu              %s; %llu jobs, %llu programs\n", engine_->name().c_str(),
               static_cast<unsigned long long>(s.jobs), static_cast<unsigned long long>(s.program_cache_entries));
  std::fprintf(out, "dispatch prefill %s (%llu refused by the NPU: tier or shape); split rows %llu npu / %llu cpu\n",
               routes(prefill_stats.prefill).c_str(), static_cast<unsigned long long>(prefill_stats.npu_refused),
               static_cast<unsigned long long>(prefill_stats.npu_rows), static_cast<unsigned long long>(prefill_stats.cpu_rows));
  if (prefill_stats.modeled_routed_us > 0) {
    std::fprintf(out, "dispatch model   prefill matmuls: routed %.2f ms, CPU alone %.2f ms, NPU alone %.2f ms (modeled)\n",
                 prefill_stats.modeled_routed_us / 1e3, prefill_stats.modeled_cpu_us / 1e3, prefill_stats.modeled_npu_us / 1e3);
  }
  // The most frequent shapes' choices (a MoE has one per expert size).
  std::vector<DispatchStats::Choice> choices = prefill_stats.choices;
  std::stable_sort(choices.begin(), choices.end(), [](const auto& a, const auto& b) { return a.count > b.count; });
  constexpr size_t kShown = 12;
  if (choices.size() > kShown) {
    std::fprintf(out, "  (the %zu most frequent of %zu prefill shapes)\n", kShown, choices.size());
    choices.resize(kShown);
  }
  for (const DispatchStats::Choice& c : choices) {
    std::fprintf(out, "  prefill %-4s M=%-4lld K=%-5lld N=%-6lld x%-5llu -> %-5s%s  cpu %.1f us, npu %.1f us, routed %.1f us (modeled)\n",
                 std::string(tier_name(c.tier)).c_str(), static_cast<long long>(c.m), static_cast<long long>(c.k),
                 static_cast<long long>(c.n), static_cast<unsigned long long>(c.count), route_name(c.route),
                 c.route == Route::kSplit ? fmt::format(" ({} rows to the NPU)", c.npu_rows).c_str() : "", c.cpu_us,
                 c.npu_us, c.routed_us);
  }
  std::fprintf(out, "dispatch decode  %s; overlay %llu hits, %llu misses (hit rate %.1f %%, %s clock), %llu skipped "
                    "(NPU busy, or predicted late), %llu over the host budget (%g of decode); host time %.1f us a job (measured)\n",
               routes(decode.decode).c_str(), static_cast<unsigned long long>(decode.overlay_hits),
               static_cast<unsigned long long>(decode.overlay_misses), 100.0 * decode.hit_rate(), clock_name(options_),
               static_cast<unsigned long long>(decode.overlay_skipped),
               static_cast<unsigned long long>(decode.overlay_over_budget), options_.overlay_budget,
               decode.overlay_hits + decode.overlay_misses > 0
                   ? decode.overlay_host_us / static_cast<double>(decode.overlay_hits + decode.overlay_misses)
                   : 0.0);
  if (!decode.roles.empty()) {
    std::vector<OverlayRoleCount> roles = decode.roles;
    std::sort(roles.begin(), roles.end(), [](const auto& a, const auto& b) { return a.role < b.role; });
    std::string by_role;
    for (const OverlayRoleCount& r : roles) {
      by_role += fmt::format("{}{} {} of {} ({:.3f})", by_role.empty() ? "" : ", ", r.role, r.hits, r.candidates, r.coverage());
    }
    std::fprintf(out, "dispatch overlay by tensor role, the NPU's result taken (%s clock): %s\n", clock_name(options_),
                 by_role.c_str());
  }
  std::fprintf(out, "npu time         modeled device %.2f ms (from the profile, not measured); host wall %.2f ms (measured, vnpu on this CPU)\n",
               s.modeled_device_us / 1e3, s.host_wall_us / 1e3);
  std::fprintf(out, "npu window       %llu maps, %llu evictions\n", static_cast<unsigned long long>(s.maps),
               static_cast<unsigned long long>(s.evictions));
  if (config != nullptr && config->n_conv_layers > 0) {
    std::fprintf(out, "npu recurrent    %d short-convolution layers: their in/out projections are routed like any "
                      "matmul; each convolution and its window of past inputs stay on the CPU\n",
                 config->n_conv_layers);
  }
  if (config != nullptr && config->has_delta_layers()) {
    std::fprintf(out, "npu recurrent    %d DeltaNet layers: their projections are routed like any matmul; each "
                      "convolution, delta-rule update and state stay on the CPU\n",
                 config->n_delta_layers);
  }
  const uint64_t on_npu = prefill_stats.prefill[static_cast<size_t>(Route::kNpu)] + prefill_stats.prefill[static_cast<size_t>(Route::kSplit)] +
                          decode.decode[static_cast<size_t>(Route::kOverlay)];
  if (on_npu == 0 && prefill_stats.npu_refused > 0) {
    std::fprintf(out, "npu note         nothing ran on the NPU: its datapath reads orkpack i8, i8s, nf4 (W8A8) and i4 "
                      "(W4A4) tensors, and a quantized GGUF's blocks are none of them; pack the model's F32/F16/BF16 GGUF for "
                      "it with `ork pack MODEL --npu PROFILE`, or run that GGUF with --npu\n");
  }
}

std::string NpuCli::json(const DispatchStats& decode, const DispatchStats& prefill_stats) const {
  if (!engine_) return {};
  const npu::NpuEngine::Stats s = counted();
  return fmt::format(", \"npu\": {{\"device\": \"{}\", \"jobs\": {}, \"prefill\": {}, \"refused\": {}, \"decode\": {}, "
                     "\"overlay\": {{\"hits\": {}, \"misses\": {}, \"skipped\": {}, \"over_budget\": {}, \"budget\": {}, \"host_ms\": {:.3f}, \"hit_rate\": {:.4f}, \"clock\": \"{}\", \"roles\": {}}}, "
                     "\"modeled_prefill_ms\": {{\"routed\": {:.3f}, \"cpu_only\": {:.3f}, \"npu_only\": {:.3f}}}, "
                     "\"modeled_device_ms\": {:.3f}, \"modeled\": true, \"host_wall_ms\": {:.3f}, \"maps\": {}, \"evictions\": {}}}"
                     ", \"perf_model\": {}",
                     engine_->name(), s.jobs, routes_json(prefill_stats.prefill), prefill_stats.npu_refused, routes_json(decode.decode),
                     decode.overlay_hits, decode.overlay_misses, decode.overlay_skipped, decode.overlay_over_budget,
                     options_.overlay_budget, decode.overlay_host_us / 1e3, decode.hit_rate(),
                     clock_name(options_), roles_json(decode), prefill_stats.modeled_routed_us / 1e3, prefill_stats.modeled_cpu_us / 1e3,
                     prefill_stats.modeled_npu_us / 1e3, s.modeled_device_us / 1e3, s.host_wall_us / 1e3, s.maps, s.evictions,
                     model_->json());
}

void NpuCli::restart_counts() {
  if (engine_) base_ = engine_->stats();
}

npu::NpuEngine::Stats NpuCli::counted() const {
  npu::NpuEngine::Stats s = engine_->stats();
  s.jobs -= base_.jobs;
  s.modeled_device_us -= base_.modeled_device_us;
  s.host_wall_us -= base_.host_wall_us;
  s.maps -= base_.maps;
  s.unmaps -= base_.unmaps;
  s.evictions -= base_.evictions;
  return s;  // program_cache_entries: what the device holds, not a count
}

Status NpuCli::finish() {
  if (!trace_data_) return Status::ok();
  engine_.reset();  // drain the device first
  ORK_RETURN_IF_ERROR(trace_data_->write_json(trace));
  std::fprintf(stderr, "ork: trace: %zu events written to %s\n", trace_data_->events().size(), trace.c_str());
  return Status::ok();
}

}  // namespace ork::cli
