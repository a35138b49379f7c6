// The built-in calibration text (data/calibration/, public domain),
// compiled into the binary so that `ork pack` calibrates by default.
#pragma once

#include <string_view>

namespace ork::cli {

// What to call it on stderr and in a pack's metadata (ork.calibration.source).
inline constexpr const char* kBuiltinCalibrationName = "<built-in calibration text: State of the Union addresses>";

std::string_view builtin_calibration_text();

}  // namespace ork::cli
