// ork pack: convert a GGUF into an orkpack under a bit budget.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/escape.h"
#include "core/output_file.h"
#include "engines/npu/profile.h"

#include "commands.h"
#include "model/model.h"
#include "model/tokenizer/tokenizer.h"
#include "model/imatrix_collect.h"
#include "quant/carry.h"
#include "quant/imatrix.h"
#include "quant/packer.h"
#include "text_input.h"

namespace ork::cli {
namespace {

struct PackCliOptions {
  std::string input, output;
  double bpw = 0;
  uint64_t budget = 0;
  std::string imatrix, calib, tiers_file, write_tiers;
  std::vector<std::string> rules;
  std::string uniform;
  bool no_rotate = false;
  bool no_gptq = false;
  int calib_ctx = 128;
  int calib_chunks = 64;
  int threads = 0;
  std::string npu;
};

// Everything that can be checked before the first tensor is measured:
// where the outputs go, and that the input is a model ork can run.
Status check_before_work(const PackCliOptions& c, const std::string& map_path) {
  ORK_RETURN_IF_ERROR(check_output_path(c.output, {c.input, c.imatrix, c.calib, c.tiers_file}, "-o"));
  ORK_RETURN_IF_ERROR(check_output_path(map_path, {c.input, c.imatrix, c.calib, c.tiers_file, c.output},
                                        c.write_tiers.empty() ? "the tier map" : "--write-tiers"));
  if (map_path == c.output) return error(StatusCode::kInvalidArgument, "--write-tiers is the same file as -o");
  // The packer reads tensors by name; the model's own load checks that they
  // are the ones its metadata describes (shapes, block count).
  return Model::load(c.input).status();
}

int pack(const PackCliOptions& c) {
  const std::string map_path = c.write_tiers.empty() ? c.output + ".tiers" : c.write_tiers;
  if (Status st = check_before_work(c, map_path); !st.is_ok()) return fail(st.to_string());
  PackOptions o;
  if (!c.npu.empty()) {
    // A pack for a device with an NPU: only tiers it reads, so that every
    // matmul can be routed there in prefill, and i8s - both planes at W8A8
    // on the NPU, the high plane alone (int4) on the CPU's decode path - as
    // the sensitive set the overlay recomputes. nf4 reaches the NPU through
    // its 16-entry int8 table; i5 and i6 are CPU-only and left out.
    auto profile = npu::find_profile(c.npu);
    if (!profile.is_ok()) return fail("--npu: " + profile.status().message());
    o.candidates = {Tier::kI4, Tier::kNf4, Tier::kI8s};
    std::fprintf(stderr, "ork: planning for %s: tiers i4, nf4 (via int8) and i8s (the overlay's sensitive set)\n",
                 profile->name.c_str());
  }
  o.warn = [](const std::string& message) { std::fprintf(stderr, "ork: warning: %s\n", escape_text(message).c_str()); };
  o.input = c.input;
  o.output = c.output;
  o.rotate = !c.no_rotate;
  o.gptq = !c.no_gptq;
  o.threads = c.threads;
  if (c.budget > 0) o.budget = c.budget;
  if (c.bpw > 0) o.bpw = c.bpw;
  if (!c.uniform.empty()) {
    auto rule = parse_tier_rule(".=" + c.uniform);
    if (!rule.is_ok()) return fail(rule.status().message());
    o.rules.push_back(*rule);
  }
  for (const std::string& text : c.rules) {
    auto rule = parse_tier_rule(text);
    if (!rule.is_ok()) return fail(rule.status().message());
    o.rules.push_back(*rule);
  }
  if (!c.tiers_file.empty()) {
    auto map = read_tier_map(c.tiers_file);
    if (!map.is_ok()) return fail(map.status().message());
    o.tier_map = std::move(map).value();
  }
  if (!o.bpw && !o.budget && o.rules.empty() && o.tier_map.empty()) {
    // A quantized source keeps its size: its K-quants are carried and the
    // rest share what their own bytes were. A float one gets 4.5 bpw.
    auto source = GgufFile::open(c.input);
    if (!source.is_ok()) return fail(source.status().to_string());
    if (quantized_source(*source)) {
      o.source_budget = true;
    } else {
      o.bpw = 4.5;
    }
    o.budget_is_default = true;
  }

  std::optional<ImportanceMatrix> imatrix;
  if (!c.imatrix.empty()) {
    auto m = ImportanceMatrix::load(c.imatrix);
    if (!m.is_ok()) return fail(m.status().to_string());
    imatrix = std::move(m).value();
    o.calibration_source = c.imatrix;
  } else if (!c.calib.empty()) {
    auto model = Model::load(c.input);
    if (!model.is_ok()) return fail(model.status().to_string());
    auto tokens = tokenize_file(**model, c.calib, c.calib_ctx * c.calib_chunks);
    if (!tokens.is_ok()) return fail(tokens.status().to_string());
    std::fprintf(stderr, "ork: collecting an importance matrix from %zu tokens of %s\n", tokens->ids.size(), c.calib.c_str());
    auto m = collect_importance(**model, tokens->ids, c.calib_ctx, o.rotation_seed, tokens->bos,
                                       [](int done, int total) { progress_bar("imatrix", done, total); });
    if (!m.is_ok()) return fail(m.status().to_string());
    imatrix = std::move(m).value();
    o.calibration_source = c.calib;
  }
  if (imatrix) o.imatrix = &*imatrix;

  const auto t0 = std::chrono::steady_clock::now();
  auto report = pack_model(o, [](int phase, size_t done, size_t total, const std::string&) {
    progress_bar(phase == 0 ? "measure" : "write", static_cast<int>(done + 1), static_cast<int>(total));
  });
  if (!report.is_ok()) return fail(report.status().to_string());
  if (!report->warning.empty()) std::fprintf(stderr, "ork: warning: %s\n", report->warning.c_str());
  const Status wrote_map = write_file_atomically(
      map_path, "# tier map of " + c.output + " (ork pack); edit and pass back with --tiers\n" +
                    format_tier_map(report->tier_map));
  if (!wrote_map.is_ok()) return fail(wrote_map.to_string());
  std::map<std::string, std::pair<int, uint64_t>> histogram;
  int rotated = 0;
  for (const auto& t : report->tensors) {
    auto& h = histogram[std::string(tier_name(t.tier))];
    h.first++;
    h.second += t.bytes;
    rotated += t.rotated;
  }
  std::fprintf(stderr, "ork: wrote %s in %.1fs: %.2f MiB, %llu parameters, %.3f bits per weight; %d tensors rotated\n",
               c.output.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               static_cast<double>(report->bytes) / (1 << 20), static_cast<unsigned long long>(report->params),
               report->bpw(), rotated);
  for (const auto& [tier, h] : histogram) {
    std::fprintf(stderr, "  %-4s %4d tensors %10.2f MiB\n", tier.c_str(), h.first, static_cast<double>(h.second) / (1 << 20));
  }
  std::fprintf(stderr, "ork: tier map written to %s\n", map_path.c_str());
  return 0;
}

}  // namespace

Runner add_pack(CLI::App& app) {
  auto c = std::make_shared<PackCliOptions>();
  app.add_option("input", c->input, "GGUF model to pack (F32/F16/BF16, or quantized as llama.cpp writes them)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("-o,--output", c->output, "orkpack to write")->required();
  app.add_option("--bpw", c->bpw,
                 "Budget: bits per weight over all parameters (default: 4.5 for an F32/F16/BF16 source; a quantized "
                 "one keeps its own size, its Q4_K...IQ4_XS tensors carried unchanged)")
      ->check(number_in(0, 32, true));
  app.add_option("--budget", c->budget, "Budget: total tensor bytes")->check(number_in(1, 1e18));
  app.add_option("--imatrix", c->imatrix, "Importance matrix from `ork imatrix`")->check(CLI::ExistingFile);
  app.add_option("--calib", c->calib, "Calibration text: collect an importance matrix first")->check(CLI::ExistingFile);
  app.add_option("--calib-ctx", c->calib_ctx, "Calibration window in tokens")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--calib-chunks", c->calib_chunks, "Calibration windows")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--tier", c->rules, "Rule 'regex=tier' fixing matching tensors (repeatable; later rules win)");
  app.add_option("--tiers", c->tiers_file, "Tier map file ('tensor = tier' lines), wins over rules")->check(CLI::ExistingFile);
  app.add_option("--uniform", c->uniform, "Every matrix at one tier: " + tier_names());
  app.add_option("--write-tiers", c->write_tiers, "Where to write the tier map (default: <output>.tiers)");
  app.add_flag("--no-rotate", c->no_rotate, "Never rotate (default: rotate each tensor where it measures better)");
  app.add_flag("--no-gptq", c->no_gptq,
               "Round to nearest only (default: error-correcting rounding where the imatrix has input covariances)");
  app.add_option("--npu", c->npu,
                 "Plan for a device with this NPU (rk3588, hexagon-v75, hexagon-v79): only tiers the NPU reads - i4, "
                 "nf4 (through its int8 table) and i8s, the sensitive set the decode overlay recomputes at int8 while "
                 "the CPU reads its high plane; no i5/i6 (CPU only)");
  app.add_option("-t,--threads", c->threads, "Tensors quantized side by side (default: all cores)")
      ->check(thread_count());
  return [c] { return pack(*c); };
}

}  // namespace ork::cli
