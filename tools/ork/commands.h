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
Runner add_calibrate(CLI::App& app);
Runner add_template(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_cache(CLI::App& app);
Runner add_chat(CLI::App& app);

// Checks for integer options whose errors name the range (CLI11's
// PositiveNumber says "Value 0 not in range 0.000000 to 1.79...e+308").
inline CLI::Range thread_count() { return CLI::Range(1, 1024); }
inline CLI::Range token_count() { return CLI::Range(0, 1 << 20); }

// A number in [lo, hi] (or (lo, hi] when `lo_open`), finite: NaN and
// infinities are refused by name. The message says what the value means,
// e.g. "must be in [0, 1] (1 = off)". CLI11 puts the option's name first.
CLI::Validator number_in(double lo, double hi, bool lo_open = false, const std::string& meaning = "");

// Prints "ork: <message>" to stderr and returns 1.
int fail(const std::string& message);

}  // namespace ork::cli
