// Kernel microbenchmarks (Google Benchmark): the quantized matmul per tier
// (the per-channel ones and the carried q4k q6k q5k q80 q40 iq4xs) and token
// count M, on weights larger than the caches (M = 1, memory-bound:
// read GB/s) or L2-resident blocks (M > 1, compute-bound: GMAC/s), single
// thread; K = 768 is the down projection of a qwen3moe expert, 512 of a
// qwen3.6 one (batches of 16: a 512-token prefill's tokens per expert). And decode's
// loops on the thread pool against a plain read of the same bytes
// (BM_DecodeLoops). Run:
// build/release/ork-kernels-bench [--target=AVX3] [--benchmark_filter=i4]
// (--target: one of the SIMD targets this machine runs, as
// kernels/cpu/targets.h names them; the best by default).
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <string_view>
#include <atomic>
#include <random>
#include <vector>

#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "core/half.h"
#include "core/kv_layout.h"
#include "kernels/cpu/float_ops.h"
#include "kernels/cpu/kv_attention.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/recurrent_ops.h"
#include "kernels/cpu/targets.h"

namespace ork {
namespace {

struct Setup {
  std::vector<uint8_t> planes;
  std::vector<float> scales;
  std::vector<int8_t> q;
  std::vector<float> act_scale;
  std::vector<int32_t> act_sum;
  std::vector<float> y;
  std::vector<float> f32;
  QuantWeights w;
  QuantActs a;

  Setup(CodeKind kind, int64_t rows, int64_t k, int n) {
    std::mt19937 rng(1);
    planes.resize(static_cast<size_t>((plane0_row_bytes(kind, k) + plane1_row_bytes(kind, k)) * rows));
    for (auto& b : planes) b = static_cast<uint8_t>(rng());
    if (kind == CodeKind::kI8s) {
      for (int64_t i = 0; i < plane0_row_bytes(kind, k) * rows; ++i) planes[static_cast<size_t>(i)] |= 0x11;
    }
    scales.assign(static_cast<size_t>(rows), 0.01f);
    q.resize(static_cast<size_t>(n * k));
    for (auto& v : q) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    act_scale.assign(static_cast<size_t>(n), 0.1f);
    act_sum.assign(static_cast<size_t>(n), 0);
    y.resize(static_cast<size_t>(n * rows));
    w = {kind, planes.data(), plane1_row_bytes(kind, k) > 0 ? planes.data() + plane0_row_bytes(kind, k) * rows : nullptr,
         scales.data(), 1.0f, rows, k};
    a = {q.data(), act_scale.data(), act_sum.data(), k, n};
    if (block_kind(kind)) {
      // Finite block scales (f16 0.01; random bits would be NaN and
      // denormals), six-bit sub-scales, and the floats the engine keeps,
      // which the block kinds requantize per block as they do in a model.
      const CarriedLayout l = carried_layout(block_tier(kind));
      const int64_t b1 = plane1_row_bytes(kind, k);
      uint8_t* p1 = planes.data() + plane0_row_bytes(kind, k) * rows;
      for (int64_t r = 0; r < rows; ++r) {
        uint8_t* h = p1 + r * b1 + block_headers_offset(kind, k);
        for (int64_t b = 0; b < k / l.block; ++b, h += l.header_bytes) {
          const uint16_t d = 0x211F;
          std::memcpy(h, &d, 2);
          if (l.header_bytes == 4 || l.header_bytes == kQ4kHeaderBytes) std::memcpy(h + 2, &d, 2);
          for (int i = 4; l.header_bytes == kQ4kHeaderBytes && i < kQ4kHeaderBytes; ++i) h[i] &= 63;
        }
      }
      f32.resize(q.size());
      for (size_t i = 0; i < q.size(); ++i) f32[i] = 0.01f * static_cast<float>(q[i]);
      a.f32 = f32.data();
    }
  }
};

// Names by CodeKind.
const char* kKindNames[] = {"i4", "nf4", "i5", "i6", "i8", "i8s", "q4k", "q6k", "q5k", "q80",
                            "q40", "q41", "q50", "q51", "iq4nl", "iq4xs", "q3k", "q2k"};

// args: kind, M, K; rows: 128 Mi weights for M <= 8 (decode, and the
// server's slots decoding together: far beyond the caches), 512 K-wide
// rows otherwise.
void BM_QuantMatmul(benchmark::State& state) {
  const auto kind = static_cast<CodeKind>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const int64_t k = state.range(2);
  const int64_t rows = n <= 8 ? (int64_t{1} << 27) / k : 512;
  Setup s(kind, rows, k, n);
  for (auto _ : state) {
    cpu::quant_matmul(s.w, s.a, s.y.data(), rows, 0, rows);
    benchmark::DoNotOptimize(s.y.data());
  }
  const double bytes = static_cast<double>(s.planes.size() + (block_kind(kind) ? 0 : 4 * rows));
  state.counters["weight_GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GMAC/s"] =
      benchmark::Counter(static_cast<double>(rows) * k * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(kKindNames[state.range(0)]);
}

BENCHMARK(BM_QuantMatmul)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, {1, 2, 4, 8, 10, 15, 16, 64}, {512, 768, 2048, 8192}})
    ->ArgNames({"kind", "M", "K"})
    ->Unit(benchmark::kMicrosecond);

// Decode's GEMV (M = 1) on a matrix of 512 Ki weights, which stays in L2:
// the kernel's own pace with the memory out of the way - its ceiling
// beside BM_QuantMatmul's read from DRAM. On the Zen 5 of docs/BENCHMARKS.md
// 10.5 (two cores, probe 60-75 GB/s): i4 33 / 49 / 52 GB/s a core at K =
// 512 / 2048 / 8192, the carried q40 19-21 - so a Q4_0 GGUF's decode is
// bound by its kernel there, and short i4 rows nearly (session 30: the
// four-group tile for q4_0, iq4_nl, q4_K, q5_K and q6_K, docs/BENCHMARKS.md 9.2;
// q6_K and iq4_nl measured since; iq4_xs's, q4_1's, q5_0's and q5_1's through it in
// 9.3). args: kind, K.
void BM_QuantMatmulInL2(benchmark::State& state) {
  const auto kind = static_cast<CodeKind>(state.range(0));
  const int64_t k = state.range(1);
  const int64_t rows = (int64_t{1} << 19) / k;
  Setup s(kind, rows, k, 1);
  for (auto _ : state) {
    cpu::quant_matmul(s.w, s.a, s.y.data(), rows, 0, rows);
    benchmark::DoNotOptimize(s.y.data());
  }
  const double bytes = static_cast<double>(s.planes.size() + (block_kind(kind) ? 0 : 4 * rows));
  state.counters["weight_GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(kKindNames[state.range(0)]) + ", in L2");
}
BENCHMARK(BM_QuantMatmulInL2)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 9, 10, 6, 7, 14, 15, 11, 12, 13, 16, 17}, {512, 2048, 8192}})
    ->ArgNames({"kind", "K"})
    ->Unit(benchmark::kMicrosecond);

// One core's plain read of 512 MiB on huge pages, as one stream and as two
// and four read side by side (the three reads `ork bench`'s probe takes the
// best of). Run with --benchmark_repetitions to interleave them:
// build/release/ork-kernels-bench --benchmark_filter=StreamRead --benchmark_repetitions=7
void BM_StreamRead(benchmark::State& state) {
  static HugePages mem = [] {
    HugePages m(size_t{512} << 20);
    std::memset(m.data(), 1, m.size());
    return m;
  }();
  const auto* words = reinterpret_cast<const uint64_t*>(mem.data());
  const auto n = static_cast<int64_t>(mem.size() / 8);
  const int streams = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(cpu::stream_read(words, n, streams));
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(mem.size()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StreamRead)->ArgName("streams")->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond);

// The delta rule of one DeltaNet v-head over a prompt (Qwen3.5's 128 x 128
// state, one thread), token by token (mode 0) and in chunks (mode 1):
// tokens per second of one head; the state products are 4 k v MACs a token
// either way (GMAC/s counter).
void BM_DeltaRule(benchmark::State& state) {
  const bool chunked = state.range(0) == 1;
  const int n = static_cast<int>(state.range(1)), kd = 128, vd = 128;
  const int64_t stride = 3 * 128;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<float> qkv(static_cast<size_t>(n * stride)), beta(static_cast<size_t>(n), 0.5f),
      decay(static_cast<size_t>(n), 0.9f), out(static_cast<size_t>(n * vd)), S(static_cast<size_t>(kd * vd));
  for (float& x : qkv) x = nd(rng);
  for (auto _ : state) {
    std::fill(S.begin(), S.end(), 0.0f);
    (chunked ? cpu::delta_rule_chunked : cpu::delta_rule)(S.data(), kd, vd, n, qkv.data(), qkv.data() + kd,
                                                          qkv.data() + 2 * kd, stride, beta.data(), decay.data(), 1,
                                                          0.088f, out.data(), vd);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["tok/s"] = benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GMAC/s"] =
      benchmark::Counter(4.0 * kd * vd * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(chunked ? "chunked" : "recurrence");
}
BENCHMARK(BM_DeltaRule)->ArgsProduct({{0, 1}, {1, 16, 64, 512}})->ArgNames({"chunked", "n"})->Unit(benchmark::kMicrosecond);

// Decode's attention of one KV head and its group of query heads over
// n_kv cached positions (llama-1b: 8 query heads of 64 per KV head), one
// thread, by cache type (0: f16, 1: q8_0 keys and values, 2: q8_0 keys and
// f16 values): GMAC/s counts the scores' and the values' multiply-adds.
void BM_AttentionGroup(benchmark::State& state) {
  const int type = static_cast<int>(state.range(0));
  const int64_t n_kv = state.range(1);
  const int hd = 64, group = 8;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  std::vector<float> q(static_cast<size_t>(group * hd)), out(q.size()), row(static_cast<size_t>(hd));
  const KvQ8Layout lay(hd, n_kv);
  std::vector<uint16_t> k16(static_cast<size_t>(n_kv * hd)), v16(k16.size());
  std::vector<int8_t> kc(lay.codes()), vc(lay.codes());
  std::vector<float> ks(lay.scales()), vs(lay.scales()), scores(static_cast<size_t>(group * lay.positions));
  for (float& x : q) x = nd(rng);
  for (int64_t p = 0; p < n_kv; ++p) {
    for (int which = 0; which < 2; ++which) {
      for (float& x : row) x = nd(rng);
      cpu::to_f16(row.data(), hd, &(which == 0 ? k16 : v16)[static_cast<size_t>(p * hd)]);
      (which == 0 ? cpu::store_key_q8 : cpu::store_value_q8)(row.data(), hd, p, (which == 0 ? kc : vc).data(),
                                                              (which == 0 ? ks : vs).data());
    }
  }
  const float scale = 0.125f;
  for (auto _ : state) {
    if (type == 0) {
      cpu::attention_group_f16(q.data(), group, k16.data(), v16.data(), n_kv, hd, hd, scale, scores.data(), out.data());
    } else {
      cpu::attention_group_q8(q.data(), group, kc.data(), ks.data(), type == 1 ? vc.data() : nullptr, vs.data(),
                              v16.data(), n_kv, hd, scale, scores.data(), out.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GMAC/s"] =
      benchmark::Counter(2.0 * group * hd * n_kv * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(type == 0 ? "f16" : type == 1 ? "q8_0" : "q8_0 keys, f16 values");
}
BENCHMARK(BM_AttentionGroup)->ArgsProduct({{0, 1, 2}, {2048, 8192}})->ArgNames({"type", "n_kv"})->Unit(benchmark::kMicrosecond);

// Decode's matmul loops as Context::matmuls_together runs them: one pool
// loop per group over its rows in blocks of 4, shares of at least 8 blocks
// claimed as the threads free up (each a whole share of what is left, as
// the engine claims them), all threads of the machine, over i4
// matrices on huge pages larger than the caches. Arg 0: the GEMV kernel;
// arg 1: a plain vectorised read of the same bytes in the same loops, as
// four streams a share (the probe's best: in session 41 one stream a share
// read 52-60 GB/s at two threads, two 57, four 65-70, the probe 72), the
// most these loops can read. Their GB/s side by side is the kernel's
// fraction of what the access pattern allows. Two stacks:
//   BM_DecodeLoops: llama-1b (16 layers of q/k/v, o, gate/up and down, then
//     the output: 520.9 MB);
//   BM_ExpertLoops: the routed experts of the qwen3.6-35b-a3b shape (12
//     layers, 64 experts each of gate and up 512 x 2048 and down 2048 x
//     512; each layer's 8 routed experts, drawn at random, as one gate/up
//     loop and one down loop: 101 + 50 MB a token, scattered over 1.2 GB;
//     sixteen tokens an iteration, each routed afresh).
// build/release/ork-kernels-bench --benchmark_filter='DecodeLoops|ExpertLoops'
struct DecodeStack {
  static constexpr int64_t kMaxRows = 32000, kMaxK = 8192;
  HugePages mem;
  std::vector<QuantWeights> mats;
  std::vector<std::vector<size_t>> groups;  // matrices run as one loop
  std::vector<float> scales;  // each matrix's own rows, as a pack lays them out (cold when read)
  std::vector<int8_t> q = std::vector<int8_t>(kMaxK, 3);
  float act_scale = 0.1f;
  int32_t act_sum = 0;

  explicit DecodeStack(const std::vector<std::pair<int64_t, int64_t>>& shapes) {  // rows, k
    int64_t total = 0, total_rows = 0;
    for (auto [rows, k] : shapes) total += rows * k / 2, total_rows += rows;
    scales.assign(static_cast<size_t>(total_rows), 0.01f);
    mem = HugePages(static_cast<size_t>(total));
    uint64_t x = 0x9E3779B97F4A7C15ull;  // xorshift: random nibbles, fast to make
    for (int64_t i = 0; i + 8 <= total; i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      std::memcpy(mem.data() + i, &x, 8);
    }
    int64_t at = 0, row = 0;
    for (auto [rows, k] : shapes) {
      mats.push_back({CodeKind::kI4, mem.data() + at, nullptr, scales.data() + row, 1.0f, rows, k});
      at += rows * k / 2, row += rows;
    }
  }
  void add_group(std::vector<size_t> group) { groups.push_back(std::move(group)); }

  static DecodeStack& llama() {
    static DecodeStack s = [] {
      constexpr int64_t kEmbd = 2048, kFf = 8192, kKv = 512, kVocab = 32000, kLayers = 16;
      std::vector<std::pair<int64_t, int64_t>> shapes;
      for (int l = 0; l < kLayers; ++l) {
        for (auto shape : {std::pair{kEmbd, kEmbd}, {kKv, kEmbd}, {kKv, kEmbd}, {kEmbd, kEmbd}, {kFf, kEmbd},
                           {kFf, kEmbd}, {kEmbd, kFf}}) {
          shapes.push_back(shape);
        }
      }
      shapes.emplace_back(kVocab, kEmbd);
      DecodeStack d(shapes);
      for (size_t l = 0; l < kLayers; ++l) {
        const size_t b = l * 7;
        d.add_group({b, b + 1, b + 2});
        d.add_group({b + 3});
        d.add_group({b + 4, b + 5});
        d.add_group({b + 6});
      }
      d.add_group({shapes.size() - 1});
      return d;
    }();
    return s;
  }

  static DecodeStack& experts() {
    static DecodeStack s = [] {
      constexpr int64_t kEmbd = 2048, kFf = 512, kLayers = 12, kExperts = 64, kUsed = 8;
      std::vector<std::pair<int64_t, int64_t>> shapes;
      for (int64_t i = 0; i < kLayers * kExperts; ++i) {
        for (auto shape : {std::pair{kFf, kEmbd}, {kFf, kEmbd}, {kEmbd, kFf}}) shapes.push_back(shape);
      }
      DecodeStack d(shapes);
      // Sixteen tokens, each drawing its own experts: one routing read over
      // and over would find part of its 151 MB in the L3.
      std::mt19937 rng(11);
      for (int token = 0; token < 16; ++token) {
        for (int64_t l = 0; l < kLayers; ++l) {
          std::vector<size_t> ids(static_cast<size_t>(kExperts));
          std::iota(ids.begin(), ids.end(), static_cast<size_t>(l * kExperts));
          std::shuffle(ids.begin(), ids.end(), rng);
          ids.resize(static_cast<size_t>(kUsed));
          std::vector<size_t> gate_up, down;
          for (size_t e : ids) {
            gate_up.insert(gate_up.end(), {3 * e, 3 * e + 1});
            down.push_back(3 * e + 2);
          }
          d.add_group(gate_up);
          d.add_group(down);
        }
      }
      return d;
    }();
    return s;
  }
};

// One pass of a stack's loops (those `runs` takes), as the engine's decode
// runs them: each loop's matrices split between the pool's threads in
// blocks of four rows; `plain`: a plain read of the same bytes in the same
// loops instead of the GEMV. Each matrix of a loop writes its own rows of
// y, as the engine's jobs do (one y shared by all of them had the threads
// writing the same lines).
struct DecodePass {
  DecodeStack& s;
  std::vector<float> y;
  std::atomic<uint64_t> sink{0};

  explicit DecodePass(DecodeStack& stack) : s(stack) {
    size_t most_rows = 0;
    for (const auto& group : s.groups) {
      size_t rows = 0;
      for (size_t m : group) rows += static_cast<size_t>(s.mats[m].rows + 3) / 4 * 4;
      most_rows = std::max(most_rows, rows);
    }
    y.resize(most_rows);
  }
  template <class Runs>
  uint64_t bytes(const Runs& runs) const {
    uint64_t total = 0;
    for (size_t g = 0; g < s.groups.size(); ++g) {
      if (!runs(g)) continue;
      for (size_t m : s.groups[g]) total += static_cast<uint64_t>(s.mats[m].rows * s.mats[m].k / 2);
    }
    return total;
  }
  template <class Runs>
  void run(bool plain, const Runs& runs) {
    ThreadPool& pool = ThreadPool::global();
    for (size_t g = 0; g < s.groups.size(); ++g) {
      if (!runs(g)) continue;
      const auto& group = s.groups[g];
      std::vector<int64_t> first{0};
      for (size_t m : group) first.push_back(first.back() + (s.mats[m].rows + 3) / 4);
      pool.run(
          first.back(),
          [&](int64_t b, int64_t e) {
            size_t i = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), b) - first.begin()) - 1;
            for (; b < e; ++i) {
              const QuantWeights& w = s.mats[group[i]];
              const int64_t end = std::min(e, first[i + 1]);
              const int64_t r0 = 4 * (b - first[i]), r1 = std::min(w.rows, 4 * (end - first[i]));
              if (plain) {
                const auto* p = reinterpret_cast<const uint64_t*>(w.p0 + r0 * w.k / 2);
                sink.fetch_add(cpu::stream_read(p, (r1 - r0) * w.k / 16, 4), std::memory_order_relaxed);
              } else {
                cpu::quant_matmul(w, {s.q.data(), &s.act_scale, &s.act_sum, w.k, 1}, y.data() + 4 * first[i], w.rows, r0,
                                  r1);
              }
              b = end;
            }
          },
          8, ThreadPool::Schedule::kGuided);
    }
    benchmark::DoNotOptimize(y.data());
  }
};

// Arg: 0 the GEMV kernel, 1 a plain read; plus 2 for every even group
// alone, 4 for every odd one (the experts' gate/up loops, their downs).
void RunDecodeLoops(benchmark::State& state, DecodeStack& s) {
  const bool plain = state.range(0) % 2 == 1;
  const int only = static_cast<int>(state.range(0) / 2);  // 0 every group, 1 the even ones, 2 the odd
  auto runs = [&](size_t g) { return only == 0 || static_cast<int>(g % 2) == only - 1; };
  DecodePass pass(s);
  for (auto _ : state) pass.run(plain, runs);
  benchmark::DoNotOptimize(pass.sink.load());
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(pass.bytes(runs)) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  static const char* const kWhat[] = {"", ", even groups (gate/up)", ", odd groups (down)"};
  state.SetLabel(std::string(plain ? "plain read, same loops" : "i4 GEMV") + kWhat[only]);
}

void BM_DecodeLoops(benchmark::State& state) { RunDecodeLoops(state, DecodeStack::llama()); }
BENCHMARK(BM_DecodeLoops)->Arg(0)->Arg(1)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The cost of a call: llama-1b's decode stack on one thread, each matrix
// read in calls of arg rows (its rows split into runs of that many, each a
// separate quant_matmul with its own four streams), as decode's loops split
// a matrix between threads and claims. Against arg 0 (one call a matrix),
// what each new set of streams costs.
void BM_DecodeCallRows(benchmark::State& state) {
  DecodeStack& s = DecodeStack::llama();
  const int64_t run = state.range(0);
  uint64_t bytes = 0;
  for (const QuantWeights& w : s.mats) bytes += static_cast<uint64_t>(w.rows * w.k / 2);
  std::vector<float> y(static_cast<size_t>(DecodeStack::kMaxRows));
  for (auto _ : state) {
    for (const QuantWeights& w : s.mats) {
      const int64_t step = run > 0 ? run : w.rows;
      for (int64_t r0 = 0; r0 < w.rows; r0 += step) {
        cpu::quant_matmul(w, {s.q.data(), &s.act_scale, &s.act_sum, w.k, 1}, y.data(), w.rows, r0,
                          std::min(w.rows, r0 + step));
      }
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DecodeCallRows)->Arg(0)->Arg(1024)->Arg(256)->Arg(128)->Arg(64)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();

// The access pattern's own limit, one thread, no arithmetic: a plain read
// (four streams a region, the hardware's prefetchers alone) of 64 MB as
// regions of `region` KB at random places in `space` GB of huge pages,
// against the same 64 MB read as one region (region 0). The routed experts
// are such regions (a 512 x 2048 i4 matrix is 512 KB) in a pack of several
// GB. On the Zen 5 of session 43, 512 KB regions in 2 GB read at 0.95-0.96
// of the long region (four runs); on the Zen 5 VM of session 50, whose
// host maps 4 KiB pages (`ork bench --probe`), 512 KB regions read at 0.90
// of it in 2 GB and 0.86 in 6 GB, 2 MB regions at 0.94 and 0.89 (medians of
// five; docs/BENCHMARKS.md 10.15).
void BM_ScatteredRead(benchmark::State& state) {
  constexpr size_t kSpaceMax = size_t{6} << 30, kRead = size_t{64} << 20;
  static HugePages mem = [] {
    HugePages m(kSpaceMax);
    if (m.data() != nullptr) std::memset(m.data(), 1, kSpaceMax);
    return m;
  }();
  if (mem.data() == nullptr) {
    state.SkipWithError("cannot allocate 6 GiB");
    return;
  }
  const size_t space = static_cast<size_t>(state.range(1)) << 30;
  const size_t region = state.range(0) > 0 ? static_cast<size_t>(state.range(0)) << 10 : kRead;
  const size_t regions = space / region, per_read = kRead / region;
  std::mt19937 rng(3);
  std::vector<size_t> order(regions);
  std::iota(order.begin(), order.end(), size_t{0});
  uint64_t sink = 0;
  for (auto _ : state) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i = 0; i < per_read; ++i) {
      const auto* p = reinterpret_cast<const uint64_t*>(mem.data() + order[i] * region);
      sink += cpu::stream_read(p, static_cast<int64_t>(region / 8), 4);
    }
  }
  benchmark::DoNotOptimize(sink);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kRead) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ScatteredRead)
    ->ArgNames({"region_KB", "space_GB"})
    ->Args({0, 2})->Args({512, 2})->Args({2048, 2})->Args({512, 6})->Args({2048, 6})->Args({0, 2})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// The experts: every loop, then the gate/up loops alone, then the downs alone.
void BM_ExpertLoops(benchmark::State& state) { RunDecodeLoops(state, DecodeStack::experts()); }
BENCHMARK(BM_ExpertLoops)->DenseRange(0, 5)->Unit(benchmark::kMillisecond)->UseRealTime();

// The GEMV over a plain read of the same loops, pass by pass: each
// iteration one pass of each, back to back, and the ratio of their times
// (the plain read's over the GEMV's). A machine whose bandwidth drifts
// with its neighbours (a VM's read bandwidth swung 26-62 GB/s within an
// hour in session 52) moves both passes of an iteration alike, so the
// ratios' median holds where BM_DecodeLoops' and BM_ExpertLoops' GB/s,
// minutes apart, do not: two binaries or two settings are compared by
// their medians here, run alternately. Counters: the median ratio and its
// quartiles, and both passes' median GB/s.
void RunDecodeOverPlain(benchmark::State& state, DecodeStack& s) {
  auto every = [](size_t) { return true; };
  DecodePass pass(s);
  const double bytes = static_cast<double>(pass.bytes(every));
  std::vector<double> ratio, gemv, plain;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    pass.run(true, every);
    const auto t1 = std::chrono::steady_clock::now();
    pass.run(false, every);
    const auto t2 = std::chrono::steady_clock::now();
    const double plain_s = std::chrono::duration<double>(t1 - t0).count();
    const double gemv_s = std::chrono::duration<double>(t2 - t1).count();
    ratio.push_back(plain_s / gemv_s);
    plain.push_back(bytes / plain_s * 1e-9);
    gemv.push_back(bytes / gemv_s * 1e-9);
  }
  benchmark::DoNotOptimize(pass.sink.load());
  auto quantile = [](std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
  };
  state.counters["of_plain"] = quantile(ratio, 0.5);
  state.counters["q1"] = quantile(ratio, 0.25);
  state.counters["q3"] = quantile(ratio, 0.75);
  state.counters["gemv_GB/s"] = quantile(gemv, 0.5);
  state.counters["plain_GB/s"] = quantile(plain, 0.5);
  state.SetLabel("i4 GEMV over a plain read of the same loops, pass by pass");
}
void BM_DecodeOverPlain(benchmark::State& state) { RunDecodeOverPlain(state, DecodeStack::llama()); }
BENCHMARK(BM_DecodeOverPlain)->Iterations(24)->Unit(benchmark::kMillisecond)->UseRealTime();
void BM_ExpertsOverPlain(benchmark::State& state) { RunDecodeOverPlain(state, DecodeStack::experts()); }
BENCHMARK(BM_ExpertsOverPlain)->Iterations(24)->Unit(benchmark::kMillisecond)->UseRealTime();

#if defined(__x86_64__)
// The int8 multiply ceiling of one core: 12 independent chains of
// vpmaddubsw in registers (32 multiply-adds each), nothing else. The GEMM
// figures above are judged against this.
__attribute__((target("avx2"))) void BM_PmaddubswPeak(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx2")) {
    state.SkipWithError("no AVX2");
    return;
  }
  constexpr int64_t kIters = 1 << 20;
  for (auto _ : state) {
    // Twelve named registers (an array would live in memory and measure
    // store-to-load forwarding instead).
    __m256i v0 = _mm256_set1_epi8(1), v1 = _mm256_set1_epi8(2), v2 = _mm256_set1_epi8(3), v3 = _mm256_set1_epi8(4);
    __m256i v4 = _mm256_set1_epi8(5), v5 = _mm256_set1_epi8(6), v6 = _mm256_set1_epi8(7), v7 = _mm256_set1_epi8(8);
    __m256i v8 = _mm256_set1_epi8(9), v9 = _mm256_set1_epi8(10), v10 = _mm256_set1_epi8(11), v11 = _mm256_set1_epi8(12);
    const __m256i w = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < kIters; ++i) {
      v0 = _mm256_maddubs_epi16(v0, w), v1 = _mm256_maddubs_epi16(v1, w), v2 = _mm256_maddubs_epi16(v2, w);
      v3 = _mm256_maddubs_epi16(v3, w), v4 = _mm256_maddubs_epi16(v4, w), v5 = _mm256_maddubs_epi16(v5, w);
      v6 = _mm256_maddubs_epi16(v6, w), v7 = _mm256_maddubs_epi16(v7, w), v8 = _mm256_maddubs_epi16(v8, w);
      v9 = _mm256_maddubs_epi16(v9, w), v10 = _mm256_maddubs_epi16(v10, w), v11 = _mm256_maddubs_epi16(v11, w);
      // Keeps the chains and the loop from being folded away.
      asm volatile("" : "+x"(v0), "+x"(v1), "+x"(v2), "+x"(v3), "+x"(v4), "+x"(v5), "+x"(v6), "+x"(v7), "+x"(v8),
                   "+x"(v9), "+x"(v10), "+x"(v11));
    }
    const __m256i all = _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(v0, v1), _mm256_xor_si256(v2, v3)),
                                         _mm256_xor_si256(_mm256_xor_si256(v4, v5), _mm256_xor_si256(v6, v7)));
    benchmark::DoNotOptimize(_mm256_extract_epi32(_mm256_xor_si256(all, _mm256_xor_si256(_mm256_xor_si256(v8, v9), _mm256_xor_si256(v10, v11))), 0));
  }
  state.counters["G_vpmaddubsw/s"] =
      benchmark::Counter(12.0 * kIters * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GMAC/s"] = benchmark::Counter(12.0 * 32 * kIters * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PmaddubswPeak)->Unit(benchmark::kMillisecond);

// The same ceiling on AVX-512 VNNI: ten independent chains of 512-bit
// vpdpbusd (64 multiply-adds each) in named registers - what the AVX3_VNNI
// batch tiles (TileWide, the sixteen-row tile) are judged against.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void BM_VpdpbusdPeak(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512vnni")) {
    state.SkipWithError("no AVX-512 VNNI");
    return;
  }
  constexpr int64_t kIters = 1 << 20;
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(5);
  for (auto _ : state) {
    __m512i v0 = _mm512_set1_epi32(0), v1 = _mm512_set1_epi32(1), v2 = _mm512_set1_epi32(2), v3 = _mm512_set1_epi32(3);
    __m512i v4 = _mm512_set1_epi32(4), v5 = _mm512_set1_epi32(5), v6 = _mm512_set1_epi32(6), v7 = _mm512_set1_epi32(7);
    __m512i v8 = _mm512_set1_epi32(8), v9 = _mm512_set1_epi32(9);
    for (int64_t i = 0; i < kIters; ++i) {
      v0 = _mm512_dpbusd_epi32(v0, u, s), v1 = _mm512_dpbusd_epi32(v1, u, s), v2 = _mm512_dpbusd_epi32(v2, u, s);
      v3 = _mm512_dpbusd_epi32(v3, u, s), v4 = _mm512_dpbusd_epi32(v4, u, s), v5 = _mm512_dpbusd_epi32(v5, u, s);
      v6 = _mm512_dpbusd_epi32(v6, u, s), v7 = _mm512_dpbusd_epi32(v7, u, s), v8 = _mm512_dpbusd_epi32(v8, u, s);
      v9 = _mm512_dpbusd_epi32(v9, u, s);
      asm volatile("" : "+v"(v0), "+v"(v1), "+v"(v2), "+v"(v3), "+v"(v4), "+v"(v5), "+v"(v6), "+v"(v7), "+v"(v8),
                   "+v"(v9));
    }
    const __m512i all = _mm512_xor_si512(_mm512_xor_si512(_mm512_xor_si512(v0, v1), _mm512_xor_si512(v2, v3)),
                                         _mm512_xor_si512(_mm512_xor_si512(v4, v5), _mm512_xor_si512(v6, v7)));
    // Kept live as a vector (GCC 12's _mm512_reduce_add_epi32 warns of its
    // own undefined upper half).
    __m512i sum = _mm512_xor_si512(all, _mm512_xor_si512(v8, v9));
    benchmark::DoNotOptimize(sum);
  }
  state.counters["G_vpdpbusd/s"] = benchmark::Counter(10.0 * kIters * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GMAC/s"] = benchmark::Counter(10.0 * 64 * kIters * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_VpdpbusdPeak)->Unit(benchmark::kMillisecond);
#endif

}  // namespace
}  // namespace ork

int main(int argc, char** argv) {
  // --target=NAME forces a SIMD target (A/B of one kernel on two targets);
  // --threads=N sizes the pool the decode loops run on (default: every core).
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg.substr(0, 10) == "--threads=") {
      const int threads = std::atoi(argv[i] + 10);
      if (threads < 1) {
        std::fprintf(stderr, "ork-kernels-bench: --threads wants a count of at least 1, not %s\n", argv[i] + 10);
        return 2;
      }
      ork::ThreadPool::set_default_threads(threads);
      continue;
    }
    if (arg.substr(0, 9) != "--target=") {
      rest.push_back(argv[i]);
      continue;
    }
    const int found = ork::cpu::target_index(argv[i] + 9);
    if (found < 0) {
      std::fprintf(stderr, "ork-kernels-bench: no target %s here (this machine runs: %s)\n", argv[i] + 9,
                   ork::cpu::target_names().c_str());
      return 2;
    }
    ork::cpu::force_target(found);
  }
  benchmark::AddCustomContext("simd_target", ork::cpu::current_target());
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
