// ork calibrate: measure the CPU for the dispatcher's performance model (a
// few seconds), cache it per machine, thread count and binary, and show it.
#include <cstdio>

#include "commands.h"
#include "core/thread_pool.h"
#include "dispatch/perf_model.h"
#include "text_input.h"

namespace ork::cli {
namespace {

struct CalibrateOptions {
  bool show = false;
  bool force = false;
  bool json = false;
  int threads = 0;
};

int calibrate(const CalibrateOptions& o) {
  if (o.threads > 0) ThreadPool::set_default_threads(o.threads);
  ThreadPool& pool = ThreadPool::global();
  const std::string path = PerfModel::cache_path(pool.size());
  auto progress = [](int done, int total) { progress_bar("calibrate", done, total); };
  Result<PerfModel> model = error(StatusCode::kNotFound, "not measured");
  if (o.force) {
    model = PerfModel::calibrate(pool, progress);
    if (model.is_ok()) {
      const Status saved = model->save(path);
      std::fprintf(stderr, "ork: %s\n", saved.is_ok() ? ("calibrated; saved to " + path).c_str()
                                                       : ("warning: not cached: " + saved.message()).c_str());
    }
  } else {
    std::string note;
    model = PerfModel::cached_or_calibrate(pool, &note, progress);
    if (model.is_ok()) std::fprintf(stderr, "ork: %s\n", note.c_str());
  }
  if (!model.is_ok()) return fail(model.status().to_string());
  if (o.json) {
    std::printf("%s\n", model->json().c_str());
  } else if (o.show) {
    std::printf("%s", model->describe().c_str());
  }
  return 0;
}

}  // namespace

Runner add_calibrate(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  app.add_flag("--show", o->show, "Print the model: per kernel, GB/s of weights at M=1 and GMAC/s at larger M");
  app.add_flag("--json", o->json, "Print the model as JSON");
  app.add_flag("--force", o->force, "Measure again even if this machine, thread count and binary are cached");
  app.add_option("-t,--threads", o->threads, "Threads (default: all cores; the model is per thread count)")
      ->check(thread_count());
  return [o] { return calibrate(*o); };
}

}  // namespace ork::cli
