#include "builtin_calibration.h"

// The text's bytes in the binary's read-only data (.incbin, as the built-in
// model's); ORK_BUILTIN_CALIBRATION is its absolute path, from CMake.
asm(".section .rodata\n"
    ".global ork_builtin_calibration_begin\n"
    "ork_builtin_calibration_begin:\n"
    ".incbin \"" ORK_BUILTIN_CALIBRATION "\"\n"
    ".global ork_builtin_calibration_end\n"
    "ork_builtin_calibration_end:\n"
    ".previous\n");
extern "C" const char ork_builtin_calibration_begin[];
extern "C" const char ork_builtin_calibration_end[];

namespace ork::cli {

std::string_view builtin_calibration_text() {
  return {ork_builtin_calibration_begin,
          static_cast<size_t>(ork_builtin_calibration_end - ork_builtin_calibration_begin)};
}

}  // namespace ork::cli
