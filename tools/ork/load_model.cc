#include "load_model.h"

#include <cstdio>

namespace ork::cli {

void add_mmap_flag(CLI::App& app, bool& mmap) {
  app.add_flag("--mmap", mmap,
               "Map the model file instead of reading it into memory on huge pages (starts faster and shares the "
               "page cache; decode is slower)");
}

Result<std::unique_ptr<Model>> load_model(const std::string& path, bool mmap) {
  auto model = Model::load(path, mmap ? MappedFile::Residency::kMapped : MappedFile::Residency::kResident);
  if (model.is_ok() && !mmap && !(*model)->resident()) {
    std::fprintf(stderr, "ork: %s does not fit in the memory available; mapped instead (decode is slower)\n",
                 path.c_str());
  }
  return model;
}

}  // namespace ork::cli
