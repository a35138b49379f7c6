// How decode's weight streams prefetch: the distances and one step's
// requests, shared by the quantized and the float kernels. Plain C++ (the
// compiler's prefetch builtin), so any SIMD target's code inlines it.
#ifndef ORK_KERNELS_CPU_DECODE_PREFETCH_H_
#define ORK_KERNELS_CPU_DECODE_PREFETCH_H_

#include <cstdint>

namespace ork::cpu {

// Decode's kernels read R streams a thread (quant_matmul.cc's DecodeFar and
// DecodeFar4, the block kinds' decode tiles, float_ops.cc's float rows) and
// split two windows of prefetches between them: each stream
// kDecodeWindowBytes / R ahead into L2, and kDecodeNearBytes / R ahead into
// L1 (DecodeStreamPrefetch). The far window is a fixed distance, not a
// row, which is less for long rows and several rows for short ones (plane
// 1 goes as many rows ahead as plane 0). It has to cover a core's share of
// the bandwidth times the memory latency, so it grows with the machine,
// and it was tuned per stream with two streams a thread: on the AVX2
// machine of e7031db (about 20 GB/s) 1 KB a stream won (A/B over whole
// decoded tokens, alternating rounds: the qwen3moe shape 1.01-1.07x over
// one row, llama-1b 1.036x; 2-4 KB a little less), but on a Zen 5 (70-80
// GB/s for two cores) 1 KB left decode at 0.63 of the probe. There,
// llama-1b's default pack, six alternating rounds of `ork bench -p 0 -n 64
// -r 2` with a throwaway switch: 4 KB over 1 KB 1.10x at two threads (5 of
// 6 rounds won) and 1.09x at one (6 of 6); its Q4_K_M GGUF (the block
// kinds, bound by their arithmetic) unchanged; 8 KB no better than 4 (three
// rounds, llama-1b and the 12-layer qwen3.6 MoE). Four streams split the
// window (session 41: 4 KB each gained nothing, 2 KB each did). Those
// requests went into L1; since session 52 the far ones go into L2 and
// nearer ones into L1, which on a Zen 4 beat both all-L1 distances.
constexpr int64_t kDecodeWindowBytes = 8192;  // 4 KB a stream of two, 2 KB of four
constexpr int64_t kDecodeNearBytes = 2048;

// One step of a decode stream's prefetches, at most one a cache line: each
// line is asked for twice, first far ahead into L2 and later near ahead
// into L1. The far request covers the memory latency (the hardware's
// prefetchers stop at every 4 KiB page and start late on a new row); the
// near one brings the line to L1 just before its loads. All of it into L1
// was how it stood until session 52, tuned on a Zen 5, and on a Zen 4 it
// lost to no prefetch at all. A likely cause, not proven: four streams of
// one matrix a quarter apart often sit at the same offset in a 4 KiB page
// and so in the same L1 sets, 2 KB ahead each is 32 lines a stream in
// flight, and an 8-way L1 (Zen 4) drops lines before they are read where a
// 12-way one (Zen 5) keeps them.
// Session 52, Zen 4 (AVX3_VNNI, KVM), BM_DecodeLoops/BM_ExpertLoops modes
// alternated pass by pass in one process, twenty rounds, each pass over a
// plain read's time beside it: all into L1 at 2 KB a stream 0.82 (experts)
// / 0.90 (dense); no prefetch 0.89 / 0.97; into L1 at 512 B 0.95 / 0.99;
// all into L2 at 2 KB 0.94 / 0.97; both (this) 0.98 / 1.00. Whole tokens
// in docs/BENCHMARKS.md 10.17.
inline void PrefetchL1(const uint8_t* p) { __builtin_prefetch(p, 0, 3); }
inline void PrefetchL2(const uint8_t* p) { __builtin_prefetch(p, 0, 2); }
// kPhase: the step's place in its cache line where the caller knows it at
// compile time (TileSums' steps a line at a time), else -1: from at_step.
template <int64_t kStep, int kPhase = -1>
inline void DecodeStreamPrefetch(const uint8_t* stream, int64_t at_step, int64_t near, int64_t far) {
  static_assert(kStep % 64 == 0 || 64 % kStep == 0, "a step of whole lines or a line of whole steps");
  const uint8_t* at = stream + at_step * kStep;
  if constexpr (kStep >= 64) {
    for (int64_t off = 0; off < kStep; off += 64) {
      PrefetchL1(at + near + off);
      PrefetchL2(at + far + off);
    }
  } else {
    // A line is 64 / kStep steps: its near request on the first, its far
    // one half way.
    constexpr int64_t kPerLine = 64 / kStep;
    const int64_t phase = kPhase >= 0 ? kPhase : at_step % kPerLine;
    if (phase == 0) PrefetchL1(at + near);
    if (phase == kPerLine / 2) PrefetchL2(at + far);
  }
}

}  // namespace ork::cpu

#endif  // ORK_KERNELS_CPU_DECODE_PREFETCH_H_
