// The ork CLI's subcommands. Each registers its options on a CLI11 app and
// returns the process exit code when run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace ork::cli {

using Runner = std::function<int()>;

Runner add_run(CLI::App& app);
Runner add_inspect(CLI::App& app);
Runner add_synth(CLI::App& app);
Runner add_pack(CLI::App& app);
Runner add_ppl(CLI::App& app);
Runner add_imatrix(CLI::App& app);
Runner add_bench(CLI::App& app);

// Prints "ork: <message>" to stderr and returns 1.
int fail(const std::string& message);

}  // namespace ork::cli
