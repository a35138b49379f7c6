// ork imatrix: collect an importance matrix (mean square of every matmul
// input column, raw and in the rotated basis) on calibration text.
#include <cstdio>

#include "commands.h"
#include "core/output_file.h"
#include "model/imatrix_collect.h"
#include "quant/imatrix.h"
#include "quant/rotation.h"
#include "text_input.h"

namespace ork::cli {
namespace {

struct ImatrixCliOptions {
  std::string model, text, output;
  int n_ctx = 128;
  int chunks = 64;
};

int imatrix(const ImatrixCliOptions& c) {
  if (Status st = check_output_path(c.output, {c.model, c.text}); !st.is_ok()) return fail(st.to_string());
  auto model = Model::load(c.model);
  if (!model.is_ok()) return fail(model.status().to_string());
  auto tokens = tokenize_file(**model, c.text, static_cast<size_t>(c.n_ctx) * static_cast<size_t>(c.chunks));
  if (!tokens.is_ok()) return fail(tokens.status().to_string());
  auto m = collect_importance(**model, tokens->ids, c.n_ctx, kDefaultRotationSeed, tokens->bos,
                                     [](int done, int total) { progress_bar("imatrix", done, total); });
  if (!m.is_ok()) return fail(m.status().to_string());
  const Status s = m->save(c.output, c.text);
  if (!s.is_ok()) return fail(s.to_string());
  std::fprintf(stderr, "ork: wrote %s: %zu matmul inputs over %llu tokens\n", c.output.c_str(), m->entries().size(),
               static_cast<unsigned long long>(m->tokens()));
  return 0;
}

}  // namespace

Runner add_imatrix(CLI::App& app) {
  auto c = std::make_shared<ImatrixCliOptions>();
  app.add_option("-m,--model", c->model, "Model (GGUF)")->required()->check(CLI::ExistingFile);
  app.add_option("-f,--file", c->text, "Calibration text")->required()->check(CLI::ExistingFile);
  app.add_option("-o,--output", c->output, "Importance matrix file to write")->required();
  app.add_option("-c,--ctx-size", c->n_ctx, "Window in tokens")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  app.add_option("--chunks", c->chunks, "Windows of calibration text to use")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 30));
  return [c] { return imatrix(*c); };
}

}  // namespace ork::cli
