// What `ork` says to someone who does not know it yet: with no arguments,
// what ork is and the commands to start with; for a mistyped command, the
// one that was probably meant.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace ork::cli {

void print_front_door(std::FILE* out, const std::vector<std::string>& commands);

// The known command nearest to `typed` by edit distance, or "" when none
// is near enough to be a plausible typo.
std::string closest_command(const std::string& typed, const std::vector<std::string>& commands);

}  // namespace ork::cli
