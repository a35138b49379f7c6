// The sampling options of the commands that generate (run, chat), in
// llama.cpp's spellings, each checked for its range.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

#include "ork/ork.hpp"

namespace ork::cli {

struct SamplingCli {
  api::SamplerOptions options;
  int64_t seed = -1;  // -1: random (printed)
  void add_options(CLI::App& app);
  // The options with the seed drawn if none was given.
  api::SamplerOptions resolve() const;
  // One line on stderr: what the sampler does, and its seed.
  static void describe(const api::SamplerOptions& o);
};

}  // namespace ork::cli
