#include "kernels/cpu/targets.h"

#include <hwy/highway.h>
#include <hwy/targets.h>

#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ork::cpu {
namespace {

// The ARMv8.2 dot product (sdot), as the kernel reports it.
[[maybe_unused]] bool cpu_has_dotprod() {
#if defined(__aarch64__) && defined(__linux__) && defined(HWCAP_ASIMDDP)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}

// AVX-512 VNNI (CPUID leaf 7, ECX bit 11). Highway lists AVX3 only where
// the OS keeps the AVX-512 state, so that is not asked again here.
[[maybe_unused]] bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (c & (1u << 11)) != 0;
#else
  return false;
#endif
}

struct Target {
  int64_t hwy;  // Highway's target bit
  bool dot;     // the int8 dot product: NEON's sdot, AVX3's VNNI
};

const std::vector<Target>& usable_targets() {
  static const std::vector<Target> targets = [] {
    std::vector<Target> v;
    for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
#if HWY_ARCH_ARM_A64
      if (t == HWY_NEON && cpu_has_dotprod()) v.push_back({t, true});
#endif
#if HWY_ARCH_X86
      if (t == HWY_AVX3 && cpu_has_avx512_vnni()) v.push_back({t, true});
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
  if (t.dot) return t.hwy == HWY_NEON ? "NEON_DOTPROD" : "AVX3_VNNI";
  return hwy::TargetName(t.hwy);
}

int target_index(const char* name) {
  for (int t = 0; t < compiled_target_count(); ++t) {
    if (std::strcmp(name, target_name(t)) == 0) return t;
  }
  return -1;
}

std::string target_names() {
  std::string names;
  for (int t = 0; t < compiled_target_count(); ++t) names += std::string(t ? ", " : "") + target_name(t);
  return names;
}

void force_target(int index) {
  g_forced = index;
  hwy::SetSupportedTargetsForTest(index < 0 ? 0 : usable_targets()[static_cast<size_t>(index)].hwy);
}

const char* current_target() {
  if (usable_targets().empty()) return "none";
  return target_name(g_forced < 0 ? 0 : g_forced);
}

bool int8_dot() {
  if (usable_targets().empty()) return false;
  return usable_targets()[static_cast<size_t>(g_forced < 0 ? 0 : g_forced)].dot;
}

}  // namespace ork::cpu
