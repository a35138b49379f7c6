#include "front_door.h"

#include <algorithm>

#include "model/config.h"

namespace ork::cli {

void print_front_door(std::FILE* out, const std::vector<std::string>& commands) {
  std::string all;
  for (const std::string& c : commands) all += (all.empty() ? "" : ", ") + c;
  std::fprintf(out,
               "ork runs quantized language models, dense and Mixture-of-Experts, fast on the CPU (and on an NPU\n"
               "beside it, where there is one). It reads the GGUF files of the llama.cpp world and its own orkpack.\n"
               "\n"
               "Start here:\n"
               "  ork run                                   a story from the built-in model (stories260K), with its speed\n"
               "  ork run -m model.gguf -p \"Hello\" -n 128    generate from any GGUF you downloaded\n"
               "  ork chat -m model.gguf                    talk with it, in the model's own chat template\n"
               "  ork serve -m model.gguf --port 8080       an OpenAI-compatible server, with a chat page at /\n"
               "  ork bench -m model.gguf                   prefill and decode speed beside the machine's memory bandwidth\n"
               "  ork pack model.gguf -o model.orkpack      convert to ork's own format (a quantized GGUF keeps its blocks)\n"
               "  ork ppl -m model.orkpack -f text.txt --ref model.gguf\n"
               "                                            perplexity and KL divergence against the original\n"
               "\n"
               "Models: any GGUF of a supported architecture (%s), quantized or\n"
               "not. A quantized one (Q4_K_M, Q8_0, IQ4_XS, ...) is converted for the fast kernels on its first start,\n"
               "nothing re-quantized, and kept for the next (`ork cache ls`); `ork pack` turns one into an orkpack,\n"
               "`ork inspect` shows what a file holds.\n"
               "\n"
               "Commands: %s. `ork <command> --help` lists a command's options.\n",
               supported_arch_names().c_str(), all.c_str());
}

namespace {

// Edits (insert, delete, substitute, swap two neighbours) from a to b: a
// swapped pair ("rnu" for run) is the commonest typo, so it costs one.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_command(const std::string& typed, const std::vector<std::string>& commands) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& c : commands) {
    // A prefix ("ins" for inspect) is as good as a near miss.
    const size_t d = c.rfind(typed, 0) == 0 && !typed.empty() ? 1 : edit_distance(typed, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // At most two edits, and fewer than half the word: "rnu" is run, "xyz" is nothing.
  return best_distance <= 2 && best_distance * 2 <= std::max<size_t>(typed.size(), 2) ? best : std::string();
}

}  // namespace ork::cli
