// The routed experts of a mixture-of-experts layer on the CPU: decoding one
// token, every routed expert's gate and up as one parallel loop, then every
// down as another; a batch, each expert whole on one thread. Both give the
// one-expert-at-a-time loop's results bit for bit (same kernels and rows,
// outputs summed in the order of the experts' ids).
#include <algorithm>
#include <numeric>

#include "core/thread_pool.h"
#include "engines/cpu/cpu_engine.h"
#include "kernels/cpu/float_ops.h"
#include "kernels/cpu/quant_matmul.h"

namespace ork {
namespace {

bool integer_tier(const WeightView& w) { return w.is_tier && !float_tier(w.tier); }

// acc (n floats) += w * out: one routed expert's share of a token's output.
void add_scaled(float w, const float* out, int64_t n, float* acc) {
  for (int64_t i = 0; i < n; ++i) acc[i] += w * out[i];
}

// One token's k routed slots in the order of their experts' ids: the order
// the one-expert-at-a-time loop adds their outputs.
void slots_in_expert_order(const int32_t* ids, int k, std::vector<int>& order) {
  order.resize(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return ids[a] < ids[b]; });
}

// acc (E floats) += each of one token's k routed outputs (outputs[j * E],
// slot j) times its routing weight, in expert order. `order` is scratch.
void add_in_expert_order(const int32_t* ids, const float* weights, const float* outputs, int k, int64_t E, float* acc,
                         std::vector<int>& order) {
  slots_in_expert_order(ids, k, order);
  for (int j : order) add_scaled(weights[j], outputs + static_cast<size_t>(j) * E, E, acc);
}

}  // namespace

bool CpuEngine::fused_experts(const ExpertsJob& job) const {
  if (!fast()) return false;
  for (int i = 0; i < job.n * job.k; ++i) {
    const auto e = static_cast<size_t>(job.ids[i]);
    if (!integer_tier(job.gate[e]) || !integer_tier(job.up[e]) || !integer_tier(job.down[e])) return false;
  }
  return true;
}

void CpuEngine::run_experts(const ExpertsJob& job) {
  if (job.n == 1) {
    experts_decode(job);
  } else {
    experts_prefill(job);
  }
}

// Decode (one token): gate and up of every routed expert as one parallel
// loop, then every down as another, instead of three joins per expert.
void CpuEngine::experts_decode(const ExpertsJob& job) {
  const int k = job.k;
  const int64_t E = job.n_embd, ff = job.n_ff;
  // The routed experts' views are scattered over a layer's table and long
  // out of cache (a token reads hundreds of MB between two visits): ask for
  // all of them at once rather than miss on each in turn.
  for (int j = 0; j < k; ++j) {
    const auto e = static_cast<size_t>(job.ids[j]);
    for (const WeightView* w : {&job.gate[e], &job.up[e], &job.down[e]}) {
      __builtin_prefetch(w);
      __builtin_prefetch(reinterpret_cast<const char*>(w) + sizeof(WeightView) - 1);
    }
  }
  // The routed slots in the order of their experts' ids: position p holds
  // slot order[p], in the buffers. The loops' jobs go in compute order:
  // position at[c] c-th - the experts whose weights are present first.
  std::vector<int>& order = expert_order_;
  slots_in_expert_order(job.ids, k, order);
  auto expert_at = [&](int p) { return job.ids[order[static_cast<size_t>(p)]]; };
  // Each expert is asked once: a read may finish between two questions,
  // and an expert absent at the first and present at the second would be
  // in neither half (its rows never computed, the sum stopped short).
  std::vector<char>& present = expert_present_;
  present.assign(static_cast<size_t>(k), 1);
  if (job.present) {
    for (int p = 0; p < k; ++p) present[static_cast<size_t>(p)] = job.present(expert_at(p)) ? 1 : 0;
  }
  std::vector<int>& at = compute_order_;
  at.clear();
  for (char first : {1, 0}) {
    for (int p = 0; p < k; ++p) {
      if (present[static_cast<size_t>(p)] == first) at.push_back(p);
    }
  }
  moe_gate_.resize(static_cast<size_t>(k * ff));
  moe_up_.resize(static_cast<size_t>(k * ff));
  moe_out_.resize(static_cast<size_t>(k * E));
  QuantInputs& in_cache = shared_in_;
  in_cache.reset();
  std::vector<QuantJob>& jobs = jobs_;
  jobs.clear();
  if (down_in_.size() < static_cast<size_t>(k)) down_in_.resize(static_cast<size_t>(k));
  std::vector<QuantJob>& downs = down_jobs_;
  downs.clear();
  for (int c = 0; c < k; ++c) {
    const int p = at[static_cast<size_t>(c)];
    const auto e = static_cast<size_t>(expert_at(p));
    const auto pos = static_cast<size_t>(p);
    jobs.push_back({quant_weights(job.gate[e].tier_tensor(), job.i8s_high_only),
                    &quantize_input(job.gate[e], job.x, in_cache), &moe_gate_[pos * ff]});
    jobs.push_back({quant_weights(job.up[e].tier_tensor(), job.i8s_high_only),
                    &quantize_input(job.up[e], job.x, in_cache), &moe_up_[pos * ff]});
    set_basis(job.down[e], down_in_[pos]);
    downs.push_back({quant_weights(job.down[e].tier_tensor(), job.i8s_high_only), &down_in_[pos], &moe_out_[pos * E]});
  }
  // An expert still arriving is awaited by the thread about to read it.
  std::function<void(int)> await_gate_up, await_down;
  if (job.await) {
    await_gate_up = [&](int i) { job.await(expert_at(at[static_cast<size_t>(i / 2)])); };
    await_down = [&](int i) { job.await(expert_at(at[static_cast<size_t>(i)])); };
  }
  // Each expert's down input (SwiGLU, rotation, quantization) is made by
  // the thread that finishes the expert's gate and up rows, while the other
  // goes on reading weights, instead of all of them between the two loops.
  matmuls_together(
      jobs, 2,
      [&](int c) {
        const int p = at[static_cast<size_t>(c)];
        float* g = &moe_gate_[static_cast<size_t>(p) * ff];
        float* u = &moe_up_[static_cast<size_t>(p) * ff];
        if (job.before_swiglu) job.before_swiglu(p, g, u);
        cpu::swiglu(g, u, ff, g);
        fill_input(g, ff, down_in_[static_cast<size_t>(p)]);
      },
      await_gate_up);
  // after_gate_up leads the down loop: the other threads start on the
  // downs while the calling thread runs it.
  std::function<void()> lead;
  if (job.after_gate_up) {
    down_quantized_.resize(static_cast<size_t>(k));
    for (int p = 0; p < k; ++p) {
      const QuantInput& in = down_in_[static_cast<size_t>(p)];
      down_quantized_[static_cast<size_t>(p)] = {in.codes.data(), in.scale, in.sum, in.k};
    }
    lead = [&] { job.after_gate_up(moe_gate_.data(), down_quantized_.data(), moe_out_.data()); };
    if (job.after_gate_up_first) {
      lead();
      lead = nullptr;
    }
  }
  // Likewise each expert's output is added to the token's sum as soon as
  // it and every expert before it in id order are done: the same sum, in
  // the same order, as add_in_expert_order after the loop.
  if (sum_ready_.size() < static_cast<size_t>(k)) sum_ready_ = std::vector<std::atomic<bool>>(static_cast<size_t>(k));
  for (int p = 0; p < k; ++p) sum_ready_[static_cast<size_t>(p)].store(false, std::memory_order_relaxed);
  sum_next_.store(0, std::memory_order_relaxed);
  matmuls_together(downs, 1, [&](int c) {
    const int p = at[static_cast<size_t>(c)];
    if (job.before_sum) job.before_sum(p, &moe_out_[static_cast<size_t>(p) * E]);
    sum_ready_[static_cast<size_t>(p)].store(true);
    // One thread adds at a time. One that finds another adding leaves its
    // slot to it; the adder looks again after stepping down, so a slot
    // marked meanwhile is not missed (all seq_cst).
    while (!summing_.exchange(true)) {
      int next = sum_next_.load();
      for (; next < k && sum_ready_[static_cast<size_t>(next)].load(); ++next) {
        const auto slot = static_cast<size_t>(order[static_cast<size_t>(next)]);
        add_scaled(job.weights[slot], &moe_out_[static_cast<size_t>(next) * E], E, job.acc);
      }
      sum_next_.store(next);
      summing_.store(false);
      if (next == k || !sum_ready_[static_cast<size_t>(next)].load()) break;
    }
  }, await_down, lead);
}

// A batch (prefill) through the routed experts. Each thread takes whole
// experts, in the order they are stored: it gathers the expert's tokens,
// rotates and quantizes them, runs gate, up, SwiGLU and down, and writes
// each (token, slot) output row. Then each token sums its slots in expert
// order, as the one-expert-at-a-time loop does, so the results are the same
// bit for bit. That loop split each expert's rows over the threads, and the
// serial work between its matmuls (gathers, SwiGLU, sums) left a thread
// idle: 128 experts of about 32 tokens each at pp512. (Largest experts
// first was 15-25 % slower: the pool's first claims are its largest, and
// they then held most of the work.)
void CpuEngine::experts_prefill(const ExpertsJob& job) {
  const int n = job.n, k = job.k;
  const int64_t E = job.n_embd, ff = job.n_ff;
  const auto n_exp = static_cast<int>(job.gate.size());
  // Each expert's routes (index t * k + slot), in token order: a counting sort.
  std::vector<int>& begin = moe_begin_;
  begin.assign(static_cast<size_t>(n_exp) + 1, 0);
  for (int i = 0; i < n * k; ++i) ++begin[static_cast<size_t>(job.ids[i]) + 1];
  std::partial_sum(begin.begin(), begin.end(), begin.begin());
  struct Expert {
    int e, m;
    const float *gate_signs, *up_signs, *down_signs;
  };
  std::vector<Expert> experts;
  for (int e = 0; e < n_exp; ++e) {
    const auto ue = static_cast<size_t>(e);
    const int m = begin[ue + 1] - begin[ue];
    if (m == 0) continue;
    // Signs looked up here: the table is not for several threads at once.
    auto signs = [&](const WeightView& w) {
      return w.rotation_block > 0 ? signs_.get(w.k_stored, w.rotation_seed) : nullptr;
    };
    experts.push_back({e, m, signs(job.gate[ue]), signs(job.up[ue]), signs(job.down[ue])});
  }
  std::vector<int32_t>& routes = routes_;
  routes.resize(static_cast<size_t>(n) * k);
  {
    std::vector<int> next(begin.begin(), begin.end() - 1);
    for (int i = 0; i < n * k; ++i) {
      int& at = next[static_cast<size_t>(job.ids[i])];
      routes[static_cast<size_t>(at++)] = i;
    }
  }
  moe_out_.resize(static_cast<size_t>(n * k * E));  // by route
  auto run_experts = [&](int64_t first, int64_t last) {
    // Per thread: the gathered input, the quantized gate/up and down
    // inputs, the gate, up and down outputs.
    thread_local std::vector<float> in, f32, gate, up, out;
    thread_local std::vector<int8_t> codes;
    thread_local std::vector<float> scales;
    thread_local std::vector<int32_t> sums;
    for (int64_t j = first; j < last; ++j) {
      const Expert& x = experts[static_cast<size_t>(j)];
      const auto ue = static_cast<size_t>(x.e);
      const WeightView &g = job.gate[ue], &u = job.up[ue], &d = job.down[ue];
      const int32_t* r = &routes[static_cast<size_t>(begin[ue])];
      const auto m = static_cast<size_t>(x.m);
      in.resize(m * E);
      for (size_t i = 0; i < m; ++i) std::copy_n(&job.x[static_cast<size_t>(r[i] / k) * E], E, &in[i * E]);
      auto prepare = [&](const float* src, int64_t cols, const WeightView& w, const float* signs) {
        const int64_t kw = w.k_stored;
        f32.resize(m * static_cast<size_t>(kw));
        codes.resize(m * static_cast<size_t>(kw));
        scales.resize(m);
        sums.resize(m);
        pad_rotate_quantize(src, x.m, cols, kw, w.rotation_block, signs, f32.data(), codes.data(), scales.data(),
                            sums.data());
        return QuantActs{codes.data(), scales.data(), sums.data(), kw, x.m, f32.data()};
      };
      const QuantActs gu = prepare(in.data(), E, g, x.gate_signs);
      gate.resize(m * ff);
      up.resize(m * ff);
      cpu::quant_matmul(quant_weights(g.tier_tensor(), job.i8s_high_only), gu, gate.data(), ff, 0, ff);
      const bool same_basis = u.k_stored == g.k_stored && u.rotation_block == g.rotation_block &&
                              u.rotation_seed == g.rotation_seed;
      // An up projection stored in another basis than gate's gets its own
      // input, made in the same buffers once gate is done with them.
      const QuantActs ua = same_basis ? gu : prepare(in.data(), E, u, x.up_signs);
      cpu::quant_matmul(quant_weights(u.tier_tensor(), job.i8s_high_only), ua, up.data(), ff, 0, ff);
      cpu::swiglu(gate.data(), up.data(), static_cast<int64_t>(m) * ff, gate.data());
      const QuantActs da = prepare(gate.data(), ff, d, x.down_signs);
      out.resize(m * E);
      cpu::quant_matmul(quant_weights(d.tier_tensor(), job.i8s_high_only), da, out.data(), E, 0, E);
      for (size_t i = 0; i < m; ++i) std::copy_n(&out[i * E], E, &moe_out_[static_cast<size_t>(r[i]) * E]);
    }
  };
  pool_->run(static_cast<int64_t>(experts.size()), run_experts, 1, ThreadPool::Schedule::kShared);
  // Each token's slots summed in expert order (acc starts at zero).
  pool_->run(
      n,
      [&](int64_t first, int64_t last) {
        thread_local std::vector<int> order;
        for (int64_t t = first; t < last; ++t) {
          const size_t at = static_cast<size_t>(t) * k;
          add_in_expert_order(&job.ids[at], &job.weights[at], &moe_out_[at * E], k, E, &job.acc[static_cast<size_t>(t) * E],
                              order);
        }
      },
      8);
}

}  // namespace ork
