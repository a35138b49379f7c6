#include "kernels/cpu/targets.h"

#include <hwy/highway.h>
#include <hwy/targets.h>

#include <cstdint>
#include <vector>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace ork::cpu {
namespace {

// The ARMv8.2 dot product (sdot), as the kernel reports it.
bool cpu_has_dotprod() {
#if defined(__aarch64__) && defined(__linux__) && defined(HWCAP_ASIMDDP)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}

struct Target {
  int64_t hwy;  // Highway's target bit
  bool dot;     // NEON with the dot product
};

const std::vector<Target>& usable_targets() {
  static const std::vector<Target> targets = [] {
    std::vector<Target> v;
    for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
#if HWY_ARCH_ARM_A64
      if (t == HWY_NEON && cpu_has_dotprod()) v.push_back({t, true});
#endif
      v.push_back({t, false});
    }
    return v;
  }();
  return targets;
}

int g_forced = -1;  // index into usable_targets(), -1: the best

}  // namespace

int compiled_target_count() { return static_cast<int>(usable_targets().size()); }

const char* target_name(int index) {
  const Target& t = usable_targets()[static_cast<size_t>(index)];
  return t.dot ? "NEON_DOTPROD" : hwy::TargetName(t.hwy);
}

void force_target(int index) {
  g_forced = index;
  hwy::SetSupportedTargetsForTest(index < 0 ? 0 : usable_targets()[static_cast<size_t>(index)].hwy);
}

const char* current_target() {
  if (usable_targets().empty()) return "none";
  return target_name(g_forced < 0 ? 0 : g_forced);
}

bool arm_dotprod() {
  if (usable_targets().empty()) return false;
  return usable_targets()[static_cast<size_t>(g_forced < 0 ? 0 : g_forced)].dot;
}

}  // namespace ork::cpu
