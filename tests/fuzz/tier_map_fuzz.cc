// Fuzz target for tier maps (`ork pack --tiers FILE`): any text either
// parses into (tensor, tier, line) entries or gives an error naming a line;
// a map that parses formats back into one that parses to the same tiers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "quant/planner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto map = ork::parse_tier_map(text, "fuzz.tiers");
  if (!map.is_ok()) {
    if (map.status().message().rfind("fuzz.tiers:", 0) != 0) std::abort();
    return 0;
  }
  auto again = ork::parse_tier_map(ork::format_tier_map(map->tiers), "again.tiers");
  // A name with '#', '=' or surrounding blanks cannot round-trip; anything
  // else must come back the same.
  bool plain = true;
  for (const auto& [name, tier] : map->tiers) {
    plain = plain && name.find_first_of("#=\n") == std::string::npos;
  }
  if (plain && (!again.is_ok() || again->tiers != map->tiers)) std::abort();
  return 0;
}
