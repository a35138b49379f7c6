// ork: run quantized LLMs fast on CPU and NPU. One binary, subcommands.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/escape.h"
#include "kernels/cpu/targets.h"

#include "commands.h"
#include "front_door.h"

namespace ork::cli {

int fail(const std::string& message) {
  // Messages carry names read from files: print them escaped.
  std::fprintf(stderr, "ork: %s\n", escape_text(message).c_str());
  return 1;
}

CLI::Validator number_in(double lo, double hi, bool lo_open, const std::string& meaning) {
  const std::string range = fmt::format("{}{}, {}]", lo_open ? "(" : "[", lo, hi);
  const std::string tail = meaning.empty() ? "" : " (" + meaning + ")";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return fmt::format("'{}' is not a number", text);
        if (!std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo)) {
          return fmt::format("{} must be in {}{}", text, range, tail);
        }
        return std::string();
      },
      "in " + range);
}

}  // namespace ork::cli

int main(int argc, char** argv) {
  CLI::App app{"ork — runs quantized LLMs (GGUF, orkpack) fast on the CPU, and on an NPU beside it.\n"
               "`ork` alone says where to start; `ork <command> --help` lists a command's options."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ork 0.1.0");
  std::vector<std::pair<CLI::App*, ork::cli::Runner>> commands;
  auto add = [&](const char* name, const char* help, ork::cli::Runner (*setup)(CLI::App&)) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands.emplace_back(sub, setup(*sub));
  };
  add("run", "Generate text from a prompt (no -m: the built-in stories260K)", ork::cli::add_run);
  add("inspect", "Print a GGUF or orkpack file's metadata and tensor table", ork::cli::add_inspect);
  add("pack", "Convert a GGUF into an orkpack: a quantized one's blocks carried, a float one's tiers planned under a bit budget",
      ork::cli::add_pack);
  add("imatrix", "Collect an importance matrix on calibration text", ork::cli::add_imatrix);
  add("bench", "Prefill and decode speed beside the machine's measured read bandwidth", ork::cli::add_bench);
  add("ppl", "Perplexity, and KL divergence / top-1 / RMS delta-p against a reference", ork::cli::add_ppl);
  add("synth", "Write a synthetic model (random weights) of any supported architecture", ork::cli::add_synth);
  add("chat", "Talk with a model in its own chat template (no -m: the built-in stories260K)", ork::cli::add_chat);
  add("serve", "An OpenAI-compatible HTTP server with a chat page (no -m: the built-in stories260K)", ork::cli::add_serve);
  add("template", "Render a chat template for a conversation (a .jinja file or a model's own)", ork::cli::add_template);
  add("cache", "List or remove what ork keeps in its cache: converted GGUFs, performance models", ork::cli::add_cache);
  add("calibrate", "Measure the CPU for the dispatcher's performance model (cached; --show prints it)",
      ork::cli::add_calibrate);
  // ORK_SIMD=NAME runs every kernel on one of the SIMD targets this machine
  // has (`ork bench` names the one in use): for A/B measurements.
  if (const char* simd = std::getenv("ORK_SIMD"); simd != nullptr && *simd != '\0') {
    const int found = ork::cpu::target_index(simd);
    if (found < 0) {
      std::fprintf(stderr, "ork: ORK_SIMD=%s is not a SIMD target this machine runs (it runs: %s)\n",
                   ork::escape_text(simd).c_str(), ork::cpu::target_names().c_str());
      return 2;
    }
    ork::cpu::force_target(found);
  }
  std::vector<std::string> names;
  for (const auto& [sub, runner] : commands) names.push_back(sub->get_name());
  if (argc == 1) {
    ork::cli::print_front_door(stdout, names);
    return 0;
  }
  const std::string first = argv[1];
  if (first.empty() || (first[0] != '-' && std::find(names.begin(), names.end(), first) == names.end())) {
    const std::string near = ork::cli::closest_command(first, names);
    std::fprintf(stderr, "ork: '%s' is not an ork command.%s\nCommands: ", ork::escape_text(first).c_str(),
                 near.empty() ? "" : (" Did you mean '" + near + "'?").c_str());
    for (size_t i = 0; i < names.size(); ++i) std::fprintf(stderr, "%s%s", i ? ", " : "", names[i].c_str());
    std::fprintf(stderr, ". `ork` alone says where to start.\n");
    return 2;
  }
  // llama.cpp's options spelled with one dash and several letters, which
  // CLI11 cannot declare: taken under their long names.
  static const std::pair<const char*, const char*> kLlamaSpellings[] = {{"-np", "--parallel"}, {"-to", "--timeout"}, {"-sys", "--system-prompt"}, {"-ctk", "--cache-type-k"},
      {"-ctv", "--cache-type-v"}};
  std::vector<char*> args(argv, argv + argc);
  for (char*& a : args) {
    for (const auto& [from, to] : kLlamaSpellings) {
      if (std::strcmp(a, from) == 0) a = const_cast<char*>(to);
    }
  }
  try {
    app.parse(argc, args.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a usage error exits 2, as getopt tools do.
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (auto& [sub, runner] : commands) {
    if (sub->parsed()) return runner();
  }
  return 1;
}
