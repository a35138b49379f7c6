// Integer dot products for int8 activations against int8 and packed-int4
// weight rows. Decode is memory-bound: the loops stream the weight bytes
// once; int4 nibbles are inflated with a mask and a shift into int16 lanes
// and multiplied pairwise into int32 (pmaddwd on x86, the same idea on NEON).
#include "kernels/cpu/int8_dot.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/int8_dot.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <vector>

HWY_BEFORE_NAMESPACE();
namespace ork::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 int16 lanes: one 32-weight int4 group spans two such vectors
// (its low and high nibbles), whatever the native width.
using D16 = hn::CappedTag<int16_t, 16>;

int32_t DotI8(const int8_t* w, const int8_t* a, int64_t k) {
  const D16 d16;
  const hn::Rebind<int8_t, D16> d8;
  const hn::Repartition<int32_t, D16> d32;
  const auto n = static_cast<int64_t>(hn::Lanes(d16));
  auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
  int64_t i = 0;
  for (; i + n <= k; i += n) {
    const auto wv = hn::PromoteTo(d16, hn::LoadU(d8, w + i));
    const auto av = hn::PromoteTo(d16, hn::LoadU(d8, a + i));
    sum0 = hn::ReorderWidenMulAccumulate(d32, wv, av, sum0, sum1);
  }
  int32_t total = static_cast<int32_t>(hn::GetLane(hn::SumOfLanes(d32, hn::Add(sum0, sum1))));
  for (; i < k; ++i) total += static_cast<int32_t>(w[i]) * a[i];
  return total;
}

int32_t DotI4(const uint8_t* nibbles, const int8_t* a, int64_t k) {
  const D16 d16;
  const hn::Rebind<uint8_t, D16> du8;
  const hn::Rebind<int8_t, D16> d8;
  const hn::Repartition<int32_t, D16> d32;
  const auto n = static_cast<int64_t>(hn::Lanes(d16));  // divides 16
  const auto mask = hn::Set(d16, 0x0F);
  const auto eight = hn::Set(d16, 8);
  auto sum0 = hn::Zero(d32), sum1 = hn::Zero(d32);
  for (int64_t g = 0; g < k / 32; ++g) {
    const uint8_t* bytes = nibbles + g * 16;
    const int8_t* ag = a + g * 32;
    for (int64_t j = 0; j < 16; j += n) {
      const auto b = hn::BitCast(d16, hn::PromoteTo(hn::RebindToUnsigned<D16>(), hn::LoadU(du8, bytes + j)));
      const auto lo = hn::Sub(hn::And(b, mask), eight);
      const auto hi = hn::Sub(hn::ShiftRight<4>(b), eight);
      sum0 = hn::ReorderWidenMulAccumulate(d32, lo, hn::PromoteTo(d16, hn::LoadU(d8, ag + j)), sum0, sum1);
      sum0 = hn::ReorderWidenMulAccumulate(d32, hi, hn::PromoteTo(d16, hn::LoadU(d8, ag + 16 + j)), sum0, sum1);
    }
  }
  return static_cast<int32_t>(hn::GetLane(hn::SumOfLanes(d32, hn::Add(sum0, sum1))));
}

void GemvRows(int tier_bits, const uint8_t* data, const float* scales, int64_t k, const int8_t* a, float a_scale,
              float* y, int64_t begin, int64_t end) {
  if (tier_bits == 8) {
    for (int64_t r = begin; r < end; ++r) {
      y[r] = scales[r] * a_scale * static_cast<float>(DotI8(reinterpret_cast<const int8_t*>(data) + r * k, a, k));
    }
  } else {
    for (int64_t r = begin; r < end; ++r) {
      y[r] = scales[r] * a_scale * static_cast<float>(DotI4(data + r * (k / 2), a, k));
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ork::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ork::cpu {

HWY_EXPORT(DotI8);
HWY_EXPORT(DotI4);
HWY_EXPORT(GemvRows);

int32_t dot_i8(const int8_t* w, const int8_t* a, int64_t k) { return HWY_DYNAMIC_DISPATCH(DotI8)(w, a, k); }
int32_t dot_i4(const uint8_t* nibbles, const int8_t* a, int64_t k) {
  return HWY_DYNAMIC_DISPATCH(DotI4)(nibbles, a, k);
}

void gemv_rows(int tier_bits, const uint8_t* data, const float* scales, int64_t k, const int8_t* a, float a_scale,
               float* y, int64_t begin, int64_t end) {
  HWY_DYNAMIC_DISPATCH(GemvRows)(tier_bits, data, scales, k, a, a_scale, y, begin, end);
}

namespace {
std::vector<int64_t> usable_targets() {
  static const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets;
}
}  // namespace

int compiled_target_count() { return static_cast<int>(usable_targets().size()); }
const char* target_name(int index) { return hwy::TargetName(usable_targets()[static_cast<size_t>(index)]); }
void force_target(int index) {
  if (index < 0) {
    hwy::SetSupportedTargetsForTest(0);
  } else {
    hwy::SetSupportedTargetsForTest(usable_targets()[static_cast<size_t>(index)]);
  }
}

}  // namespace ork::cpu
#endif  // HWY_ONCE
