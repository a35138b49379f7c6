// The built-in model: stories260K (data/models/, MIT licence), compiled
// into the binary so that every command that runs a model works with no
// -m on a fresh build, and shows real text rather than noise.
#pragma once

#include <memory>

#include "model/model.h"
#include "ork/ork.hpp"

namespace ork::cli {

// What to call it on stderr and in reports.
inline constexpr const char* kBuiltinModelName = "<built-in stories260K>";

// Loads the built-in model and says on stderr which model it is.
Result<std::unique_ptr<Model>> load_builtin_model();
// The same through the public API.
Result<std::unique_ptr<api::LoadedModel>> load_builtin_api_model();

}  // namespace ork::cli
