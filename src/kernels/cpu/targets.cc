#include "kernels/cpu/targets.h"

#include <hwy/highway.h>
#include <hwy/targets.h>

#include <cstdint>
#include <vector>

namespace ork::cpu {
namespace {

const std::vector<int64_t>& usable_targets() {
  static const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets;
}

int64_t g_forced = 0;

}  // namespace

int compiled_target_count() { return static_cast<int>(usable_targets().size()); }
const char* target_name(int index) { return hwy::TargetName(usable_targets()[static_cast<size_t>(index)]); }

void force_target(int index) {
  g_forced = index < 0 ? 0 : usable_targets()[static_cast<size_t>(index)];
  hwy::SetSupportedTargetsForTest(g_forced);
}

const char* current_target() {
  if (g_forced != 0) return hwy::TargetName(g_forced);
  const auto& targets = usable_targets();
  return targets.empty() ? "none" : hwy::TargetName(targets.front());
}

}  // namespace ork::cpu
