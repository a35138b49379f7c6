// The decode profile as a table (ork bench --profile, ork run --profile).
#pragma once

#include <cstdio>
#include <string>

#include "model/forward.h"

namespace ork::cli {

// Per phase: time per token and its share, the part in parallel loops,
// bytes per token and the rate they were read at - beside `probe_gbps`, the
// machine's measured read bandwidth, when it is known (> 0).
// `title` heads the table (a batch of sequences: "decode profile, 4 together",
// whose tokens are the sequences' summed).
void print_profile(std::FILE* out, const Context::Profile& profile, double probe_gbps,
                   const std::string& title = "decode profile");

// The same as a JSON object member, `, "profile": [...]` (empty when no
// token was profiled).
std::string profile_json(const Context::Profile& profile);

}  // namespace ork::cli
