#include "sampling_cli.h"

#include <cstdio>
#include <random>

#include "commands.h"

namespace ork::cli {

void SamplingCli::add_options(CLI::App& app) {
  app.add_option("--temp", options.temperature, "Temperature; 0 = greedy")
      ->capture_default_str()
      ->check(number_in(0, 100, false, "0 = greedy"));
  app.add_option("--top-k", options.top_k, "Keep the k most likely tokens; 0 = off")
      ->capture_default_str()
      ->check(number_in(0, 1 << 24, false, "0 = off"));
  app.add_option("--top-p", options.top_p, "Nucleus sampling threshold; 1 = off")
      ->capture_default_str()
      ->check(number_in(0, 1, false, "1 = off"));
  app.add_option("--min-p", options.min_p, "Drop tokens below min-p x the best one's probability; 0 = off")
      ->capture_default_str()
      ->check(number_in(0, 1, false, "0 = off"));
  app.add_option("--repeat-penalty", options.repeat_penalty, "Penalty for recent tokens; 1 = off")
      ->capture_default_str()
      ->check(number_in(0, 100, true, "1 = off"));
  app.add_option("--repeat-last-n", options.repeat_last_n, "How many recent tokens are penalised")
      ->capture_default_str()
      ->check(token_count());
  app.add_option("-s,--seed", seed, "Random seed (default: random, printed)");
}

api::SamplerOptions SamplingCli::resolve() const {
  api::SamplerOptions o = options;
  o.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  return o;
}

void SamplingCli::describe(const api::SamplerOptions& sp) {
  std::fprintf(stderr, "ork: sampling: temp %.2f, top-k %d, top-p %.2f, min-p %.2f, repeat-penalty %.2f, seed %llu\n",
               sp.temperature, sp.top_k, sp.top_p, sp.min_p, sp.repeat_penalty, static_cast<unsigned long long>(sp.seed));
}

}  // namespace ork::cli
