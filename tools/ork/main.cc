// ork: run quantized LLMs fast on CPU and NPU. One binary, subcommands.
#include <cstdio>
#include <vector>

#include "commands.h"

namespace ork::cli {

int fail(const std::string& message) {
  std::fprintf(stderr, "ork: %s\n", message.c_str());
  return 1;
}

}  // namespace ork::cli

int main(int argc, char** argv) {
  CLI::App app{"ork — runs quantized LLMs (GGUF, orkpack) on the CPU; NPU engines to come.\n"
               "Run `ork <command> --help` for a command's options."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ork 0.1.0");
  std::vector<std::pair<CLI::App*, ork::cli::Runner>> commands;
  auto add = [&](const char* name, const char* help, ork::cli::Runner (*setup)(CLI::App&)) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands.emplace_back(sub, setup(*sub));
  };
  add("run", "Generate text from a prompt (no -m: a built-in synthetic model)", ork::cli::add_run);
  add("inspect", "Print a GGUF or orkpack file's metadata and tensor table", ork::cli::add_inspect);
  add("pack", "Convert a GGUF into an orkpack: per-channel tiers planned under a bit budget", ork::cli::add_pack);
  add("imatrix", "Collect an importance matrix on calibration text", ork::cli::add_imatrix);
  add("bench", "Prefill and decode speed beside the machine's measured read bandwidth", ork::cli::add_bench);
  add("ppl", "Perplexity, and KL divergence / top-1 / RMS delta-p against a reference", ork::cli::add_ppl);
  add("synth", "Write a synthetic model (random weights) of any supported architecture", ork::cli::add_synth);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, runner] : commands) {
    if (sub->parsed()) return runner();
  }
  return 1;
}
