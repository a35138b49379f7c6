// The block kinds' per-token activation tables (GroupActs, StepOffsets,
// SubSums), one SIMD target's worth. Not a header of its own:
// kernels/cpu/block_matmul-inl.h includes it inside its HWY_NAMESPACE once
// per target (Highway's -inl convention), after the activation panels and
// pair products they build on. The toggle guard lets each target's pass
// include it again.
#if defined(ORK_KERNELS_CPU_BLOCK_ACTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ORK_KERNELS_CPU_BLOCK_ACTS_INL_H_
#undef ORK_KERNELS_CPU_BLOCK_ACTS_INL_H_
#else
#define ORK_KERNELS_CPU_BLOCK_ACTS_INL_H_
#endif

// Every token's activation sum over each group of 32 (the mins' kinds),
// times the scale of the activation block (of `block` codes) it is in.
void GroupActs(const int8_t* codes, const float* scales, int n, int64_t k, int64_t block, std::vector<float>& out) {
  const int64_t groups = k / 32, nb = k / block;
  out.resize(static_cast<size_t>(n * groups));
  const hn::CappedTag<int8_t, 8> d8;
  const hn::Rebind<int16_t, decltype(d8)> d16;
  for (int t = 0; t < n; ++t) {
    const int8_t* q = codes + t * k;
    for (int64_t g = 0; g < groups; ++g) {
      auto acc = hn::Zero(d16);
      for (size_t j = 0; j < 32; j += hn::Lanes(d8)) acc = hn::Add(acc, hn::PromoteTo(d16, hn::LoadU(d8, q + g * 32 + j)));
      const float s = scales[t * nb + g * 32 / block];
      out[static_cast<size_t>(t * groups + g)] = s * static_cast<float>(hn::GetLane(hn::SumOfLanes(d16, acc)));
    }
  }
}

// BlockActs::step_offsets of n tokens' codes: each step laid out as the
// panel lays it (PanelActs in nibble order) and its lanes summed as the
// tile sums codes times activations, with kOffset for every code.
template <int kOffset>
void StepOffsets(const int8_t* codes, int n, int64_t k, std::vector<int32_t>& out) {
  const DI8 di;
  const DI32 d32;
  const int64_t steps = k / 32 / kStepGroups;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d32));
  out.resize(static_cast<size_t>(n * steps * lanes));
  thread_local std::vector<int8_t> one;
  one.resize(static_cast<size_t>(k) + kStepBytes);
  const VU8 offset = hn::Set(DU8(), static_cast<uint8_t>(kOffset));
  for (int t = 0; t < n; ++t) {
    PanelActs<true>(codes + t * k, 1, k, one.data());
    for (int64_t st = 0; st < steps; ++st) {
      const int8_t* p = one.data() + st * kStepBytes;
      const VI16 sums = hn::Add(PairsUnsigned(offset, hn::LoadU(di, p)), PairsUnsigned(offset, hn::LoadU(di, p + kL)));
      hn::StoreU(WidenAdd(sums, hn::Zero(d32)), d32, out.data() + (t * steps + st) * lanes);
    }
  }
}

// Every token's sum of each 16 activation codes (q6k's and q3k's offsets).
void SubSums(const int8_t* codes, int n, int64_t k, std::vector<int16_t>& out) {
  out.resize(static_cast<size_t>(n * (k / 16)));
  const hn::CappedTag<int8_t, 8> d8;
  const hn::Rebind<int16_t, decltype(d8)> d16;
  for (int64_t i = 0; i < n * (k / 16); ++i) {
    auto acc = hn::Zero(d16);
    for (size_t j = 0; j < 16; j += hn::Lanes(d8)) acc = hn::Add(acc, hn::PromoteTo(d16, hn::LoadU(d8, codes + i * 16 + j)));
    out[static_cast<size_t>(i)] = hn::GetLane(hn::SumOfLanes(d16, acc));
  }
}

#endif  // ORK_KERNELS_CPU_BLOCK_ACTS_INL_H_
