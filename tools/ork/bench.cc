// ork bench: prefill and decode speed of a model beside the machine's read
// bandwidth measured in the same run, so decode can be judged as a
// fraction of the memory roofline (bytes of weights and of the KV cache
// read per token).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "builtin_model.h"
#include "commands.h"
#include "expert_report.h"
#include "load_model.h"
#include "profile_report.h"
#include "replay_report.h"
#include "npu_cli.h"
#include "core/memory.h"
#include "core/page_age.h"
#include "core/page_reach.h"
#include "core/thread_pool.h"
#include "engines/cpu/read_replay.h"
#include "kernels/cpu/float_ops.h"
#include "kernels/cpu/targets.h"
#include "model/forward.h"

namespace ork::cli {
namespace {

struct BenchOptions {
  std::string model;
  int n_prompt = 512;
  int n_gen = 128;
  int n_depth = 0;
  int reps = 3;
  int threads = 0;
  NpuCli npu;
  bool json = false;
  bool mmap = false;
  bool profile = false;
  bool i8s_high_only = false;
  bool pair = false;
  bool probe_only = false;
  int parallel = 1;  // --parallel N: N sequences decoding together as well
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Summary {
  double median = 0, min = 0, max = 0;
};

Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return {v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2, v.front(), v.back()};
}

// Read bandwidth: every thread sums its slice of a buffer far larger than
// the caches, read as one stream, then as two and as four side by side;
// the best of all `passes` times three reads, in GB/s. On the Zen 5 of
// session 37 one core read 1.19x (two threads 1.24x) more from two streams
// than from one, so a probe of one stream put decode's two-stream GEMV
// nearer "the limit" than it was. The buffer is made once, so the probe
// can run again beside every repetition. It sits on huge pages where the
// kernel grants them, the fastest the machine reads, so a model that is
// mapped on 4 KiB pages (--mmap) is judged against the same limit.
class BandwidthProbe {
 public:
  explicit BandwidthProbe(ThreadPool& pool, size_t bytes = size_t{1} << 30) : pool_(pool), mem_(bytes) {
    words_ = static_cast<int64_t>(mem_.size() / 8);
    for (size_t i = 0; i < mem_.size(); i += 4096) mem_.data()[i] = static_cast<uint8_t>(i >> 12);  // touch every page
  }
  bool ok() const { return mem_.data() != nullptr; }
  double measure(int passes) {
    const double bytes = static_cast<double>(mem_.size());
    const auto* words = reinterpret_cast<const uint64_t*>(mem_.data());
    double best = 0;
    for (int pass = 0; pass < passes; ++pass) {
      for (int streams : {1, 2, 4}) {
        const double t0 = now_s();
        pool_.run(words_, [&](int64_t b, int64_t e) {
          const uint64_t s = cpu::stream_read(words + b, e - b, streams);
          sink_[static_cast<size_t>(b * 8 / std::max<int64_t>(1, words_))] += s;
        }, int64_t{1} << 20);
        best = std::max(best, bytes / (now_s() - t0) / 1e9);
      }
    }
    if (std::accumulate(sink_.begin(), sink_.end(), uint64_t{0}) == 42) std::fputc(' ', stderr);  // keep the loads
    return best;
  }
  // Whether the buffer's huge pages reach in the TLB (core/page_reach.h):
  // its first pages written over, which the reads do not mind.
  PageReach page_reach() { return measure_page_reach(mem_.data(), mem_.size()); }

 private:
  ThreadPool& pool_;
  HugePages mem_;
  int64_t words_ = 0;
  std::vector<uint64_t> sink_ = std::vector<uint64_t>(64, 0);
};

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

// The line `ork bench` prints under the machine's.
std::string page_reach_line(const PageReach& r) {
  if (r.spread_ns <= 0) return "pages            not measured (the probe's buffer is too small)";
  return fmt::format("pages            {}: a walk over {} lines in as many 4 KiB pages {:.1f} ns a step, packed {:.1f} ns{}",
                     r.huge_translations() ? "huge pages reach in the TLB" : "translated at 4 KiB",
                     kPageReachLines, r.spread_ns, r.packed_ns,
                     r.huge_translations() ? "" : " (huge pages not granted, or a VM whose host maps 4 KiB pages): "
                                                  "scattered reads, such as routed experts, pay a page walk every 4 KiB");
}

// The line under the pages line: what a page left alone since the start
// costs to read against one read just before (core/page_age.h).
std::string page_age_line(const PageAge::Figures& f) {
  if (f.aged_ns <= 0) return "page age         not measured (no memory for its buffer)";
  return fmt::format("page age         a byte from each 4 KiB page of {} MiB left alone for {:.1f} s: {:.1f} ns a page; "
                     "read again at once: {:.1f} ns ({:+.1f} ns a page for pages left alone, such as routed experts)",
                     f.bytes >> 20, f.age_s, f.aged_ns, f.fresh_ns, f.aged_ns - f.fresh_ns);
}

// The page age's buffer: a quarter of the probe's, within what it allows.
size_t page_age_bytes(size_t probe_bytes) { return probe_bytes / 4; }

std::string page_age_json(const PageAge::Figures& f) {
  return fmt::format(", \"page_age_s\": {:.2f}, \"aged_page_ns\": {:.2f}, \"fresh_page_ns\": {:.2f}", f.age_s, f.aged_ns,
                     f.fresh_ns);
}

std::string page_reach_json(const PageReach& r) {
  return fmt::format("\"page_walk_ns\": {:.2f}, \"packed_walk_ns\": {:.2f}, \"huge_translations\": {}", r.spread_ns,
                     r.packed_ns, r.huge_translations() ? "true" : "false");
}

// The decode replay of `--profile` (engines/cpu/read_replay.h): five tokens
// more, each with the weight rows of its parallel loops recorded, then read
// again in loops of the same rows by a plain read and by the decode kernels
// (in turns, each after a probe pass that leaves the caches as decode's
// other reads do): the rate this model's own access pattern allows, and
// what the kernels make of it without the model's work around them. The
// tokens go from position 0 (the context holds the repetitions', no more).
struct ReplayFigures {
  uint64_t bytes = 0;  // the last token's
  size_t loops = 0;
  std::vector<double> plain_gbps, plain_fractions, kernel_gbps, kernel_fractions;
  ReplayKinds kinds;  // loop kind by loop kind, decode beside the replays
};

Result<ReplayFigures> replay_tokens(Context& ctx, BandwidthProbe& probe, ThreadPool& pool, std::mt19937& rng,
                                    std::uniform_int_distribution<int32_t>& tok) {
  ReplayFigures out;
  ReadRecord record;
  std::vector<float> logits;
  ctx.truncate(0);
  for (int i = 0; i < 5; ++i) {
    record.clear();
    const int32_t t = tok(rng);
    ctx.set_read_record(&record);
    const Status st = ctx.eval(std::span<const int32_t>(&t, 1), logits);
    ctx.set_read_record(nullptr);
    ORK_RETURN_IF_ERROR(st);
    if (record.bytes() == 0) break;
    out.bytes = record.bytes();
    out.loops = record.loops();
    (void)probe.measure(1);  // the token's own reads out of the caches
    std::vector<double> plain_loops, kernel_loops;
    for (int turn = 0; turn < 2; ++turn) {
      const bool plain = (turn == 0) == (i % 2 == 0);
      const double seconds = record.replay(pool, plain ? ReadRecord::Replay::kPlainRead : ReadRecord::Replay::kKernels,
                                           plain ? &plain_loops : &kernel_loops);
      const double gbps = static_cast<double>(record.bytes()) / seconds / 1e9;
      (plain ? out.plain_gbps : out.kernel_gbps).push_back(gbps);
      (plain ? out.plain_fractions : out.kernel_fractions).push_back(gbps / probe.measure(1));
    }
    out.kinds.add(record, kernel_loops, plain_loops);
  }
  return out;
}

// -d: the context a measurement starts from, filled with random tokens in
// batches of 512 before the clock starts (llama-bench's -d), so prefill and
// decode are timed at that depth of KV cache.
Status fill_depth(Context& ctx, int n_depth, std::mt19937& rng, std::uniform_int_distribution<int32_t>& tok) {
  std::vector<float> logits;
  for (int done = 0; done < n_depth;) {
    const int n = std::min(512, n_depth - done);
    std::vector<int32_t> batch(static_cast<size_t>(n));
    for (auto& t : batch) t = tok(rng);
    ORK_RETURN_IF_ERROR(ctx.eval(batch, logits));
    done += n;
  }
  return Status::ok();
}

// The dispatcher's performance model in the JSON: the one --npu used, or
// this machine's cached calibration (`ork calibrate`), or a note that there
// is none yet.
std::string perf_model_json(const NpuCli& npu, ThreadPool& pool) {
  if (npu.engine() != nullptr) return {};  // npu_cli.json() carries it
  auto cached = PerfModel::load(PerfModel::cache_path(pool.size()));
  if (!cached.is_ok()) return ", \"perf_model\": {\"calibrated\": false, \"note\": \"run ork calibrate\"}";
  return ", \"perf_model\": " + cached->json();
}

// --parallel N: N sequences, each given the same depth and prompt as the
// single stream (untimed), decode together - each step one batch of N
// tokens through Context::eval_together, the weights read once for all, as
// `ork serve --parallel N` batches its slots. Returns the tokens a second
// summed over the sequences.
Result<double> decode_together(const Model& model, int n, int n_ctx, int n_depth, std::span<const int32_t> prompt,
                               int n_gen, std::mt19937& rng, std::uniform_int_distribution<int32_t>& tok,
                               Context::Profile* profile) {
  std::vector<std::unique_ptr<Context>> streams;
  std::vector<Context*> contexts;
  std::vector<float> logits;
  for (int i = 0; i < n; ++i) {
    streams.push_back(std::make_unique<Context>(model, n_ctx));
    ORK_RETURN_IF_ERROR(streams.back()->set_kv_types(cache_types()));
    if (n_depth > 0) ORK_RETURN_IF_ERROR(fill_depth(*streams.back(), n_depth, rng, tok));
    if (!prompt.empty()) ORK_RETURN_IF_ERROR(streams.back()->eval(prompt, logits));
    contexts.push_back(streams.back().get());
  }
  std::vector<int32_t> step(static_cast<size_t>(n));
  std::vector<std::span<const int32_t>> tokens;
  for (int i = 0; i < n; ++i) tokens.emplace_back(&step[static_cast<size_t>(i)], 1);
  contexts[0]->set_profile(profile);  // the batch's phases are timed by its first context
  const double t0 = now_s();
  for (int g = 0; g < n_gen; ++g) {
    for (auto& t : step) t = tok(rng);
    ORK_RETURN_IF_ERROR(Context::eval_together(contexts, tokens, logits));
  }
  const double seconds = now_s() - t0;
  contexts[0]->set_profile(nullptr);
  return static_cast<double>(n) * n_gen / seconds;
}

// --pair: decode with the NPU against the CPU alone doing the same CPU
// work (i8s from their high plane), token by token in turn - two contexts
// fed the same prompt and tokens, the order alternating at each token - so
// that the ratio does not depend on how the machine's bandwidth drifts:
// both halves of a pair see the same few milliseconds of it. (Halves of a
// whole tg run each, taken in turn, differed by 5 % pair to pair on a busy
// machine, more than the overlay costs.) A token reads far more than the
// caches hold, so one half does not warm the other's weights.
int bench_pairs(BenchOptions& o, const Model& model, int n_ctx, int n_prompt, BandwidthProbe& probe,
                std::vector<double>& bws, std::mt19937& rng, std::uniform_int_distribution<int32_t>& tok) {
  NpuCli& npu_cli = o.npu;
  if (npu_cli.engine() == nullptr) return fail("bench --pair compares decode with an NPU against the CPU alone: give --npu");
  if (o.n_gen == 0) return fail("bench --pair measures decode: -n must be > 0");
  std::vector<double> cpu_tg, npu_tg, ratios;
  DispatchStats decode_stats;
  double npu_decode_s = 0;  // the NPU half's decode time, all pairs
  // Both halves of a pair evaluate the same prompt and decode the same
  // tokens: a MoE routes them to the same experts, so the two read the same
  // weights and differ only in the NPU.
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt)), tokens(static_cast<size_t>(o.n_gen));
  // Where the device's rows are never taken (vnpu's timing), both halves
  // compute the same thing, so their logits must agree bit for bit: counted,
  // so that a pair that measures two different computations says so.
  int64_t same_logits = 0;
  // One repetition: {CPU alone, with the NPU} in tokens a second.
  auto decode_pair = [&](uint32_t depth_seed, int first) -> Result<std::array<double, 2>> {
    std::array<std::unique_ptr<Context>, 2> ctx;
    std::vector<float> logits;
    for (int half = 0; half < 2; ++half) {
      ctx[static_cast<size_t>(half)] = std::make_unique<Context>(model, n_ctx);
      Context& c = *ctx[static_cast<size_t>(half)];
      ORK_RETURN_IF_ERROR(c.set_kv_types(cache_types()));
      // The depth and the prompt on the CPU in both: a device that only
      // keeps time leaves its rows unwritten, so a prompt prefilled there
      // would give its half other hidden states - a MoE would route its
      // tokens to other experts and read other weights than its partner.
      std::mt19937 depth_rng(depth_seed);
      ORK_RETURN_IF_ERROR(fill_depth(c, o.n_depth, depth_rng, tok));
      if (!prompt.empty()) ORK_RETURN_IF_ERROR(c.eval(prompt, logits));
      if (half == 1) {
        npu_cli.attach(c);
      } else {
        c.set_i8s_high_only(true);
      }
      c.reset_dispatch_stats();
    }
    std::array<double, 2> seconds{0, 0};
    std::array<std::vector<float>, 2> out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      for (int j = 0; j < 2; ++j) {
        const auto half = static_cast<size_t>((first + static_cast<int>(i) + j) % 2);
        const double t0 = now_s();
        ORK_RETURN_IF_ERROR(ctx[half]->eval(std::span<const int32_t>(&tokens[i], 1), out[half]));
        seconds[half] += now_s() - t0;
      }
      same_logits += out[0] == out[1];
    }
    decode_stats.add(ctx[1]->dispatch_stats());
    npu_decode_s += seconds[1];
    ctx[1]->set_npu(nullptr);
    return std::array<double, 2>{o.n_gen / seconds[0], o.n_gen / seconds[1]};
  };
  for (int r = 0; r < o.reps; ++r) {
    const auto depth_seed = static_cast<uint32_t>(rng());
    for (auto& t : prompt) t = tok(rng);
    for (auto& t : tokens) t = tok(rng);
    auto tg = decode_pair(depth_seed, r % 2);
    if (!tg.is_ok()) return fail(tg.status().to_string());
    const double cpu = (*tg)[0], npu = (*tg)[1];
    cpu_tg.push_back(cpu);
    npu_tg.push_back(npu);
    ratios.push_back(npu / cpu);
    bws.push_back(probe.measure(2));
    std::fprintf(stderr, "  pair %d/%d: cpu alone %.2f tok/s, with %s %.2f tok/s, ratio %.4f; read bandwidth %.2f GB/s\n",
                 r + 1, o.reps, cpu, npu_cli.engine()->name().c_str(), npu, npu / cpu, bws.back());
  }
  const Summary c = summarize(cpu_tg), n = summarize(npu_tg), q = summarize(ratios), b = summarize(bws);
  if (o.json) {
    std::printf("{\"model\": \"%s\", \"pairs\": %d, \"tg\": %d, \"cpu_tok_s\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}, "
                "\"npu_tok_s\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}, \"ratio\": {\"median\": %.4f, \"min\": %.4f, "
                "\"max\": %.4f}, \"same_logits\": %lld, \"read_gbps\": %.2f%s}\n",
                model.path().c_str(), o.reps, o.n_gen, c.median, c.min, c.max, n.median, n.min, n.max, q.median, q.min, q.max,
                static_cast<long long>(same_logits), b.median, npu_cli.json(decode_stats, DispatchStats()).c_str());
  } else {
    std::printf("decode pairs     %d x tg%d: CPU alone (i8s high plane) %.2f tok/s, with %s %.2f tok/s\n", o.reps,
                o.n_gen, c.median, npu_cli.engine()->name().c_str(), n.median);
    std::printf("decode ratio     %.4f (median of the pairs; min %.4f, max %.4f); read bandwidth %.2f GB/s (%.2f-%.2f)\n",
                q.median, q.min, q.max, b.median, b.min, b.max);
    std::printf("decode overlay   host time %.2f ms, %.2f %% of the NPU half's decode (measured: its opens and resolves)\n",
                decode_stats.overlay_host_us / 1e3, 100.0 * decode_stats.overlay_host_us / 1e6 / std::max(npu_decode_s, 1e-9));
    std::printf("decode halves    the same logits on %lld of %lld tokens%s\n", static_cast<long long>(same_logits),
                static_cast<long long>(o.reps) * o.n_gen,
                npu_cli.engine()->results_valid() ? " (the NPU's results are taken: they may differ)"
                : same_logits == static_cast<int64_t>(o.reps) * o.n_gen ? ""
                                                                          : " - NOT the same computation: the ratio is not the overlay's");
    npu_cli.report(stdout, decode_stats, DispatchStats(), &model.config());
  }
  if (Status st = npu_cli.finish(); !st.is_ok()) return fail(st.to_string());
  return 0;
}

// The probe reads 1 GiB, or an eighth of the memory left where that is
// less (a model whose experts stay on disk, a memory cgroup): still far past
// the caches, and it leaves the model its memory.
size_t probe_bytes() {
  const std::optional<uint64_t> left = available_memory_bytes();
  return std::min<size_t>(size_t{1} << 30, left ? std::max<size_t>(size_t{64} << 20, *left / 8) : size_t{1} << 30);
}

// `--probe`: the read bandwidth alone, best of 5 passes - the limit every
// ratio divides by, for a script that runs a peer between ork's
// repetitions (bench/compare.sh) and needs the probe beside it.
int probe_only(const BenchOptions& o, ThreadPool& pool) {
  const size_t bytes = probe_bytes();
  BandwidthProbe probe(pool, bytes);
  if (!probe.ok()) return fail(fmt::format("cannot allocate the {} MiB the bandwidth probe reads", bytes >> 20));
  PageAge page_age(page_age_bytes(bytes));  // left alone while the probe reads
  const double gbps = probe.measure(5);
  const PageReach reach = probe.page_reach();
  const PageAge::Figures aged = page_age.measure();
  if (o.json) {
    std::printf("{\"machine\": {\"cpu\": \"%s\", \"threads\": %d, \"simd\": \"%s\", \"read_gbps\": %.2f, %s}}\n",
                cpu_name().c_str(), pool.size(), cpu::current_target(), gbps,
                (page_reach_json(reach) + page_age_json(aged)).c_str());
  } else {
    std::printf("read bandwidth %.2f GB/s (%s, %d threads, best of 5 passes over %zu MiB, each as 1, 2 and 4 streams a "
                "thread)\n%s\n%s\n",
                gbps, cpu_name().c_str(), pool.size(), bytes >> 20, page_reach_line(reach).c_str(),
                page_age_line(aged).c_str());
  }
  return 0;
}

int bench(BenchOptions& o) {
  if (o.threads > 0) ThreadPool::set_default_threads(o.threads);
  ThreadPool& pool = ThreadPool::global();
  if (o.probe_only) return probe_only(o, pool);
  if (o.n_prompt == 0 && o.n_gen == 0) return fail("bench: -p and -n are both 0, so there is nothing to measure");
  // Before any work (the model, the probe, --npu's calibration): flags that cannot go together.
  if (o.parallel > 1 && (o.n_gen == 0 || !o.npu.spec.empty())) {
    return fail(o.n_gen == 0 ? "bench --parallel measures decode: -n must be > 0"
                              : "bench --parallel runs on the CPU alone: leave out --npu");
  }
  std::unique_ptr<Model> model;
  if (o.model.empty()) {
    auto m = load_builtin_model();
    if (!m.is_ok()) return fail(m.status().to_string());
    model = std::move(m).value();
  } else {
    set_context_hint(o.n_depth + o.n_prompt + o.n_gen + 1);
    auto m = load_model(o.model, o.mmap);
    if (!m.is_ok()) return fail(m.status().to_string());
    model = std::move(m).value();
  }
  const ModelConfig& c = model->config();
  // Without -d the prompt is cut to the training context; a depth is kept
  // as asked (as llama-bench does), past that context with a warning.
  const int n_ctx = o.n_depth > 0 ? o.n_depth + o.n_prompt + o.n_gen + 1 : std::min(c.n_ctx_train, o.n_prompt + o.n_gen + 1);
  const int n_batch = std::max({1, o.n_prompt, std::min(o.n_depth, 512)});  // the depth is filled 512 at a time
  if (Status st = check_context(*model, n_ctx, n_batch); !st.is_ok()) return fail(st.to_string());
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(3, c.n_vocab - 1);
  const ExpertCache* cache = model->expert_cache();
  std::fprintf(stderr, "ork: measuring read bandwidth (%d threads)...\n", pool.size());
  const size_t bytes = probe_bytes();
  BandwidthProbe probe(pool, bytes);
  if (!probe.ok()) return fail(fmt::format("cannot allocate the {} MiB the bandwidth probe reads", bytes >> 20));
  ExpertCacheStats decode_cache;  // summed over the repetitions' decodes
  std::vector<double> bws = {probe.measure(5)};
  const PageReach reach = probe.page_reach();
  // Pages left alone from here to the end, read then (page_age_line).
  PageAge page_age(page_age_bytes(bytes));
  NpuCli& npu_cli = o.npu;
  if (Status st = npu_cli.start(); !st.is_ok()) return fail(st.to_string());
  if (Status st = npu_cli.check_model(*model); !st.is_ok()) return fail(st.to_string());
  DispatchStats prefill_stats, decode_stats;
  std::vector<double> pp, tg, expert_bpt, fractions;
  Context::Profile profile;
  // The KV cache every decoded token's attention reads: K and V of each
  // layer over the positions so far, on average over the generated tokens
  // (from position n_prompt to n_prompt + n_gen - 1, each reading one more).
  const int n_prompt_used = std::max(0, std::min(o.n_prompt, n_ctx - o.n_depth - o.n_gen - 1));
  const double kv_bytes = o.n_gen > 0 ? static_cast<double>(Context::kv_bytes_per_position(c, true, cache_types())) *
                                            (o.n_depth + n_prompt_used + (o.n_gen + 1) / 2.0)
                                      : 0.0;
  // Hybrids: the recurrent state each token reads and writes.
  const double rec_bytes = o.n_gen > 0 ? static_cast<double>(Context::recurrent_bytes_per_token(c)) : 0.0;
  if (o.pair) {
    return bench_pairs(o, *model, n_ctx, n_prompt_used, probe, bws, rng, tok);
  }
  std::vector<double> together, together_ratio;  // --parallel: summed tok/s, and over the rep's one stream
  Context::Profile together_profile;
  // One context for every repetition, warmed up first as llama-bench does
  // (a prompt of the same length and one decoded token, untimed): the
  // buffers of a batch and the KV cache are allocated and first touched
  // there, not inside the first timed prefill - a cold context spent 6 % of
  // a qwen3.6 pp512 zeroing pages.
  Context ctx(*model, n_ctx);
  if (Status st = ctx.set_kv_types(cache_types()); !st.is_ok()) return fail(st.to_string());
  npu_cli.attach(ctx);
  ctx.set_i8s_high_only(o.i8s_high_only);
  {
    std::vector<int32_t> warm(static_cast<size_t>(std::max(1, n_prompt_used)));
    for (auto& t : warm) t = tok(rng);
    std::vector<float> logits;
    if (Status st = ctx.eval(warm, logits); !st.is_ok()) return fail(st.to_string());
    if (Status st = ctx.eval(std::span<const int32_t>(warm.data(), 1), logits); !st.is_ok()) {
      return fail(st.to_string());
    }
    npu_cli.restart_counts();
  }
  for (int r = 0; r < o.reps; ++r) {
    ctx.truncate(0);
    ctx.reset_dispatch_stats();
    if (o.n_depth > 0) {
      std::fprintf(stderr, "  rep %d/%d: filling the context to depth %d (not timed)...\n", r + 1, o.reps, o.n_depth);
      if (Status st = fill_depth(ctx, o.n_depth, rng, tok); !st.is_ok()) return fail(st.to_string());
      ctx.reset_dispatch_stats();
    }
    std::vector<int32_t> prompt(static_cast<size_t>(n_prompt_used));
    for (auto& t : prompt) t = tok(rng);
    std::vector<float> logits;
    if (!prompt.empty()) {
      const double t0 = now_s();
      if (Status st = ctx.eval(prompt, logits); !st.is_ok()) return fail(st.to_string());
      pp.push_back(static_cast<double>(prompt.size()) / (now_s() - t0));
    }
    prefill_stats.add(ctx.dispatch_stats());
    ctx.reset_dispatch_stats();
    const uint64_t expert_bytes0 = ctx.moe_stats().expert_bytes;
    const ExpertCacheStats cache0 = cache != nullptr ? cache->stats() : ExpertCacheStats{};
    if (o.profile) ctx.set_profile(&profile);
    const double t1 = now_s();
    for (int i = 0; i < o.n_gen; ++i) {
      const int32_t t = tok(rng);
      if (Status st = ctx.eval(std::span<const int32_t>(&t, 1), logits); !st.is_ok()) return fail(st.to_string());
    }
    tg.push_back(o.n_gen / (now_s() - t1));
    if (cache != nullptr) add_expert_stats(decode_cache, expert_stats_since(cache->stats(), cache0));
    if (o.parallel > 1) {
      auto n = decode_together(*model, o.parallel, n_ctx, o.n_depth, prompt, o.n_gen, rng, tok,
                               o.profile ? &together_profile : nullptr);
      if (!n.is_ok()) return fail(n.status().to_string());
      together.push_back(*n);
      together_ratio.push_back(*n / tg.back());
    }
    ctx.set_profile(nullptr);
    decode_stats.add(ctx.dispatch_stats());
    const double rep_experts =
        o.n_gen > 0 ? static_cast<double>(ctx.moe_stats().expert_bytes - expert_bytes0) / o.n_gen : 0.0;
    if (o.n_gen > 0) expert_bpt.push_back(rep_experts);
    // The machine's bandwidth drifts: probe it again beside every
    // repetition and judge each repetition's decode against its own probe.
    bws.push_back(probe.measure(2));
    const double rep_bytes = static_cast<double>(model->dense_bytes_per_token()) + rep_experts + kv_bytes + rec_bytes;
    fractions.push_back(tg.back() * rep_bytes / 1e9 / bws.back());
    std::string line = fmt::format("  rep {}/{}:", r + 1, o.reps);
    if (!pp.empty()) line += fmt::format(" pp {:.1f} tok/s,", pp.back());
    if (o.n_gen > 0) line += fmt::format(" tg {:.1f} tok/s,", tg.back());
    if (!together.empty()) line += fmt::format(" {} together {:.1f} tok/s ({:.2f}x),", o.parallel, together.back(), together_ratio.back());
    line += fmt::format(" read bandwidth {:.2f} GB/s", bws.back());
    if (o.n_gen > 0) line += fmt::format(", decode at {:.1f} % of it", 100.0 * fractions.back());
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  // --profile on the CPU alone: the decode replay (replay_tokens).
  ReplayFigures replay;
  if (o.profile && o.n_gen > 0 && npu_cli.spec.empty() && cache == nullptr) {
    std::fprintf(stderr, "ork: recording five tokens' reads and reading each again...\n");
    auto replayed_tokens = replay_tokens(ctx, probe, pool, rng, tok);
    if (!replayed_tokens.is_ok()) return fail(replayed_tokens.status().to_string());
    replay = std::move(*replayed_tokens);
  }
  const PageAge::Figures aged = page_age.measure();
  ctx.set_npu(nullptr);
  const Summary p = pp.empty() ? Summary{} : summarize(pp), g = summarize(tg);
  // Dense weights plus the routed experts' bytes actually read per decoded token.
  const uint64_t weight_bpt = model->dense_bytes_per_token() +
                              (expert_bpt.empty() ? 0 : static_cast<uint64_t>(summarize(expert_bpt).median));
  const uint64_t bpt = weight_bpt + static_cast<uint64_t>(kv_bytes) + static_cast<uint64_t>(rec_bytes);
  const double used = g.median * static_cast<double>(bpt) / 1e9;
  const Summary b = summarize(bws), f = summarize(fractions);
  const double bw = b.median;
  const char* target = cpu::current_target();
  const Summary pt = together.empty() ? Summary{} : summarize(together),
                pr = together_ratio.empty() ? Summary{} : summarize(together_ratio);
  const std::string parallel_json =
      together.empty() ? std::string()
                       : fmt::format(", \"tg_parallel\": {{\"sequences\": {}, \"tok_s_median\": {:.3f}, \"tok_s_min\": {:.3f}, "
                                     "\"tok_s_max\": {:.3f}, \"ratio_to_one_median\": {:.4f}, \"ratio_to_one_min\": {:.4f}, "
                                     "\"ratio_to_one_max\": {:.4f}}}",
                                     o.parallel, pt.median, pt.min, pt.max, pr.median, pr.min, pr.max);
  const bool replayed = !replay.plain_gbps.empty();
  const Summary rg = replayed ? summarize(replay.plain_gbps) : Summary{},
                rf = replayed ? summarize(replay.plain_fractions) : Summary{},
                kg = replayed ? summarize(replay.kernel_gbps) : Summary{},
                kf = replayed ? summarize(replay.kernel_fractions) : Summary{};
  const std::string replay_json =
      !replayed ? std::string()
                : fmt::format(", \"replay\": {{\"bytes\": {}, \"loops\": {}, \"plain_gbps_median\": {:.3f}, "
                              "\"plain_fraction_median\": {:.4f}, \"plain_fraction_min\": {:.4f}, "
                              "\"plain_fraction_max\": {:.4f}, \"kernels_gbps_median\": {:.3f}, "
                              "\"kernels_fraction_median\": {:.4f}, \"kernels_fraction_min\": {:.4f}, "
                              "\"kernels_fraction_max\": {:.4f}{}}}",
                              replay.bytes, replay.loops, rg.median, rf.median, rf.min, rf.max, kg.median,
                              kf.median, kf.min, kf.max, replay.kinds.json());
  if (o.json) {
    std::printf("{\"model\": \"%s\", \"resident\": %s, \"machine\": {\"cpu\": \"%s\", \"threads\": %d, \"simd\": \"%s\", \"read_gbps\": %.2f, %s}, "
                "\"depth\": %d, \"cache_type_k\": \"%s\", \"cache_type_v\": \"%s\", \"pp\": {\"tokens\": %d, \"tok_s_median\": %.3f, \"tok_s_min\": %.3f, \"tok_s_max\": %.3f}, "
                "\"tg\": {\"tokens\": %d, \"tok_s_median\": %.3f, \"tok_s_min\": %.3f, \"tok_s_max\": %.3f}, "
                "\"bytes_per_token\": %llu, \"weight_bytes_per_token\": %llu, \"kv_bytes_per_token\": %llu, "
                "\"recurrent_bytes_per_token\": %llu, "
                "\"decode_gbps\": %.3f, \"roofline_fraction\": %.4f, "
                "\"roofline_fraction_min\": %.4f, \"roofline_fraction_max\": %.4f, \"read_gbps_min\": %.2f, \"read_gbps_max\": %.2f, "
                "\"reps\": %d%s%s%s}\n",
                model->path().c_str(), model->resident() ? "true" : "false", cpu_name().c_str(), pool.size(), target, bw, (page_reach_json(reach) + page_age_json(aged)).c_str(), o.n_depth,
                kv_type_name(cache_types().k), kv_type_name(cache_types().v), o.n_prompt, p.median, p.min, p.max,
                o.n_gen, g.median, g.min, g.max, static_cast<unsigned long long>(bpt),
                static_cast<unsigned long long>(weight_bpt), static_cast<unsigned long long>(kv_bytes),
                static_cast<unsigned long long>(rec_bytes), used, f.median, f.min, f.max, b.min,
                b.max, o.reps, (npu_cli.json(decode_stats, prefill_stats) + (o.profile ? profile_json(profile) : std::string()) +
                             perf_model_json(npu_cli, pool)).c_str(),
                cache != nullptr
                    ? (", \"experts\": " + expert_stats_json(decode_cache, static_cast<uint64_t>(o.n_gen) * o.reps)).c_str()
                    : "",
                (parallel_json + replay_json).c_str());
    if (Status st = npu_cli.finish(); !st.is_ok()) return fail(st.to_string());
    return 0;
  }
  // llama-bench's test names: pp512, tg128, "pp512 @ d4096".
  auto label = [&](const char* kind, int n) {
    return o.n_depth > 0 ? fmt::format("{}{} @ d{}", kind, n, o.n_depth) : fmt::format("{}{}", kind, n);
  };
  std::printf("model            %s (%s)\n", model->path().c_str(),
              cache != nullptr ? "routed experts read from disk into an expert cache, the rest in memory"
              : model->resident() ? "read into memory, huge pages" : "mapped");
  std::printf("machine          %s, %d threads, %s; read bandwidth %.2f GB/s (median of %zu probes, %.2f-%.2f)\n",
              cpu_name().c_str(), pool.size(), target, bw, bws.size(), b.min, b.max);
  std::printf("%s\n", page_reach_line(reach).c_str());
  std::printf("%s\n", page_age_line(aged).c_str());
  if (o.n_prompt > 0) {
    std::printf("prefill %-8s %8.2f tok/s (min %.2f, max %.2f over %d reps)\n", label("pp", o.n_prompt).c_str(), p.median,
                p.min, p.max, o.reps);
  } else {
    std::printf("prefill          not measured (-p 0)\n");
  }
  if (o.n_gen > 0) {
    std::printf("decode  %-8s %8.2f tok/s (min %.2f, max %.2f)\n", label("tg", o.n_gen).c_str(), g.median, g.min, g.max);
    std::printf("decode reads     %.2f MB/token (weights %.2f, KV cache %.2f [%s/%s]%s) = %.2f GB/s; %.1f %% of the read "
                "bandwidth probed beside each repetition (median; %.1f-%.1f %%)\n",
                static_cast<double>(bpt) / 1e6, static_cast<double>(weight_bpt) / 1e6, kv_bytes / 1e6,
                kv_type_name(cache_types().k), kv_type_name(cache_types().v), rec_bytes > 0 ? fmt::format(", recurrent state {:.2f}", rec_bytes / 1e6).c_str() : "", used,
                100.0 * f.median, 100.0 * f.min, 100.0 * f.max);
    if (replayed) {
      std::printf("decode replay    a token's %.2f MB of weights again in decode's own %zu loops, nothing between "
                  "them (median of 5 tokens, each beside a probe): a plain read %.2f GB/s, %.1f %% of the probe (%.1f-%.1f %%); "
                  "the decode kernels %.2f GB/s, %.1f %% (%.1f-%.1f %%); decode's %.1f %% is %.1f %% of the plain "
                  "read's and %.1f %% of the kernels'\n",
                  static_cast<double>(replay.bytes) / 1e6, replay.loops, rg.median, 100.0 * rf.median,
                  100.0 * rf.min, 100.0 * rf.max, kg.median, 100.0 * kf.median, 100.0 * kf.min, 100.0 * kf.max,
                  100.0 * f.median, 100.0 * f.median / rf.median, 100.0 * f.median / kf.median);
      replay.kinds.print(stdout);
    }
    if (!together.empty()) {
      std::printf("decode  %d together %7.2f tok/s summed (min %.2f, max %.2f): %.2fx one sequence's decode (median of "
                  "each repetition's ratio; %.2f-%.2f), %.2f tok/s each\n",
                  o.parallel, pt.median, pt.min, pt.max, pr.median, pr.min, pr.max, pt.median / o.parallel);
    }
  } else {
    std::printf("decode           not measured (-n 0)\n");
  }
  if (cache != nullptr && o.n_gen > 0) {
    print_expert_stats(stdout, "decode", decode_cache, static_cast<uint64_t>(o.n_gen) * static_cast<uint64_t>(o.reps));
  }
  if (o.profile && profile.tokens > 0) print_profile(stdout, profile, bw);
  if (o.profile && together_profile.tokens > 0) {
    print_profile(stdout, together_profile, bw, fmt::format("decode profile, {} together", o.parallel));
  }
  npu_cli.report(stdout, decode_stats, prefill_stats, &model->config());
  if (Status st = npu_cli.finish(); !st.is_ok()) return fail(st.to_string());
  return 0;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  app.add_option("-m,--model", o->model, "Model (GGUF or orkpack; default: the built-in stories260K)");
  app.add_option("-p,--n-prompt", o->n_prompt, "Prompt tokens for the prefill measurement (0: decode from an empty cache)")->capture_default_str()->check(token_count());
  app.add_option("-n,--n-gen", o->n_gen, "Tokens decoded for the decode measurement (0: prefill only)")->capture_default_str()->check(token_count());
  app.add_option("-d,--n-depth", o->n_depth,
                 "Tokens in the context before each measurement starts (filled untimed, as llama-bench's -d): prefill "
                 "and decode timed at that depth of KV cache")
      ->capture_default_str()
      ->check(token_count());
  app.add_option("-r,--reps", o->reps, "Repetitions (median reported), in one context after an untimed warm-up (a prompt of -p tokens and one decoded token), as llama-bench")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("-t,--threads", o->threads, "Threads (default: all cores)")->check(thread_count());
  o->npu.add_options(app);
  app.add_flag("--json", o->json, "Print one JSON object");
  app.add_flag("--profile", o->profile,
               "After the figures, where decode's time goes: per phase of the forward pass (q/k/v, attention, o, "
               "router, experts, output...) its time per token, the part in parallel loops, and the rate it read its "
               "bytes at; and, on the CPU alone, five more tokens' weight reads recorded and each read again in the "
               "same loops with nothing between them (decode replay), by a plain read - the rate this model's own "
               "access pattern allows - and by the decode kernels, in all and loop kind by loop kind beside decode's "
               "own time for each kind");
  app.add_flag("--i8s-high-only", o->i8s_high_only,
               "Decode reading i8s tensors' high plane alone (int4): the CPU's share of the NPU overlay");
  app.add_flag("--pair", o->pair,
               "With --npu: each repetition decodes the same tokens with the NPU and with the CPU alone (i8s high "
               "plane), token by token in turn, and reports the ratio");
  app.add_flag("--probe", o->probe_only,
               "Measure the read bandwidth alone (best of 5 passes over 1 GiB, each read as 1, 2 and 4 streams a "
               "thread, -t threads), whether huge pages reach in the TLB and what a page left alone costs to read, "
               "and exit: the limit the ratios divide by, for a script that runs another engine between ork's runs");
  app.add_option("--parallel", o->parallel,
                 "Also decode this many sequences together (also -np), each step one batch of their tokens with the "
                 "weights read once, as `ork serve --parallel` batches its slots: their summed tok/s and its ratio to "
                 "one sequence's decode in the same repetition (CPU only)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  add_load_flags(app, o->mmap);
  add_cache_type_flags(app);
  return [o] { return bench(*o); };
}

}  // namespace ork::cli
