// The mixture-of-experts feed-forward of the forward pass (forward.cc):
// routing, then the routed experts - fused into two parallel loops when
// decoding one token, each expert whole on one thread for a batch, one
// expert at a time otherwise - and qwen2moe's shared expert.
#include "model/forward.h"

#include <algorithm>
#include <atomic>
#include <numeric>

#include "core/thread_pool.h"
#include "kernels/cpu/float_ops.h"
#include "kernels/cpu/quant_matmul.h"
#include "model/forward_internal.h"
#include "model/moe.h"

namespace ork {
namespace {

// acc (n floats) += w * out: one routed expert's share of a token's output.
void add_scaled(float w, const float* out, int n, float* acc) {
  for (int i = 0; i < n; ++i) acc[i] += w * out[i];
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
void add_in_expert_order(const int32_t* ids, const float* weights, const float* outputs, int k, int E, float* acc,
                         std::vector<int>& order) {
  slots_in_expert_order(ids, k, order);
  for (int j : order) add_scaled(weights[j], outputs + static_cast<size_t>(j) * E, E, acc);
}

}  // namespace

// Decode (one token) through the routed experts on the fast path: gate and
// up of every routed expert as one parallel loop, then every down as
// another, instead of three joins per expert. Same kernels and rows as the
// per-expert loop, so the same results bit for bit. False (and nothing
// done) when an expert is not a quantized orkpack tier, or an observer
// wants to see each matmul.
bool Context::moe_decode_fused(int layer) {
  if (!fast_kernels_ || observer_) return false;
  const LayerWeights& L = model_.layer(layer);
  const int E = c_.n_embd, k = c_.n_expert_used, ff = c_.n_ff_exp;
  // The routed experts' views are scattered over a layer's table and long
  // out of cache (a token reads hundreds of MB between two visits): ask for
  // all of them at once rather than miss on each in turn.
  for (int j = 0; j < k; ++j) {
    const auto e = static_cast<size_t>(route_ids_[static_cast<size_t>(j)]);
    for (const WeightView* w : {&L.gate_exps[e], &L.up_exps[e], &L.down_exps[e]}) {
      __builtin_prefetch(w);
      __builtin_prefetch(reinterpret_cast<const char*>(w) + sizeof(WeightView) - 1);
    }
    __builtin_prefetch(&moe_stats_.hits[static_cast<size_t>(layer) * c_.n_expert + e], 1);
  }
  for (int j = 0; j < k; ++j) {
    const auto e = static_cast<size_t>(route_ids_[static_cast<size_t>(j)]);
    if (!integer_tier(L.gate_exps[e]) || !integer_tier(L.up_exps[e]) || !integer_tier(L.down_exps[e])) return false;
  }
  // The routed slots in the order of their experts' ids: position p holds
  // slot order[p], in the buffers and in both loops' jobs.
  std::vector<int>& order = expert_order_;
  slots_in_expert_order(route_ids_.data(), k, order);
  moe_gate_.resize(static_cast<size_t>(k) * ff);
  moe_up_.resize(static_cast<size_t>(k) * ff);
  moe_out_.resize(static_cast<size_t>(k) * E);
  QuantInputs& in_cache = shared_in_;
  in_cache.reset();
  std::vector<QuantJob>& jobs = jobs_;
  jobs.clear();
  if (down_in_.size() < static_cast<size_t>(k)) down_in_.resize(static_cast<size_t>(k));
  std::vector<QuantJob>& downs = down_jobs_;
  downs.clear();
  uint64_t gate_up_bytes = 0, down_bytes = 0;
  for (int p = 0; p < k; ++p) {
    const auto e = static_cast<size_t>(route_ids_[static_cast<size_t>(order[static_cast<size_t>(p)])]);
    const auto at = static_cast<size_t>(p);
    moe_stats_.hits[static_cast<size_t>(layer) * c_.n_expert + e] += 1;
    gate_up_bytes += matrix_bytes(L.gate_exps[e]) + matrix_bytes(L.up_exps[e]);
    down_bytes += matrix_bytes(L.down_exps[e]);
    jobs.push_back({quant_weights(L.gate_exps[e].tier_tensor(), i8s_high_only_),
                    &quantize_input(L.gate_exps[e], xn_.data(), in_cache), &moe_gate_[at * ff]});
    jobs.push_back({quant_weights(L.up_exps[e].tier_tensor(), i8s_high_only_),
                    &quantize_input(L.up_exps[e], xn_.data(), in_cache), &moe_up_[at * ff]});
    set_basis(L.down_exps[e], down_in_[at]);
    downs.push_back({quant_weights(L.down_exps[e].tier_tensor(), i8s_high_only_), &down_in_[at], &moe_out_[at * E]});
  }
  moe_stats_.expert_bytes += gate_up_bytes + down_bytes;
  // Each expert's down input (SwiGLU, rotation, quantization) is made by
  // the thread that finishes the expert's gate and up rows, while the other
  // goes on reading weights, instead of all of them between the two loops.
  matmuls_together(jobs, 2, [&](int p) {
    float* g = &moe_gate_[static_cast<size_t>(p) * ff];
    cpu::swiglu(g, &moe_up_[static_cast<size_t>(p) * ff], ff, g);
    fill_input(g, ff, down_in_[static_cast<size_t>(p)]);
  });
  if (profile_) lap(Profile::kExpertsGateUp, gate_up_bytes);
  // Likewise each expert's output is added to the token's sum as soon as
  // it and every expert before it in id order are done: the same sum, in
  // the same order, as add_in_expert_order after the loop.
  if (sum_ready_.size() < static_cast<size_t>(k)) sum_ready_ = std::vector<std::atomic<bool>>(static_cast<size_t>(k));
  for (int p = 0; p < k; ++p) sum_ready_[static_cast<size_t>(p)].store(false, std::memory_order_relaxed);
  sum_next_.store(0, std::memory_order_relaxed);
  matmuls_together(downs, 1, [&](int p) {
    sum_ready_[static_cast<size_t>(p)].store(true);
    // One thread adds at a time. One that finds another adding leaves its
    // slot to it; the adder looks again after stepping down, so a slot
    // marked meanwhile is not missed (all seq_cst).
    while (!summing_.exchange(true)) {
      int next = sum_next_.load();
      for (; next < k && sum_ready_[static_cast<size_t>(next)].load(); ++next) {
        const auto slot = static_cast<size_t>(order[static_cast<size_t>(next)]);
        add_scaled(route_w_[slot], &moe_out_[static_cast<size_t>(next) * E], E, moe_acc_.data());
      }
      sum_next_.store(next);
      summing_.store(false);
      if (next == k || !sum_ready_[static_cast<size_t>(next)].load()) break;
    }
  });
  if (profile_) lap(Profile::kExpertsDown, down_bytes);
  ++moe_stats_.fused_layers;
  return true;
}

// A batch (prefill) through the routed experts on the fast path. Each
// thread takes whole experts, in the order they are stored: it gathers the
// expert's tokens, rotates and quantizes them, runs gate, up, SwiGLU and
// down, and writes each (token, slot) output row. Then each token sums its
// slots in expert order, as the one-expert-at-a-time loop does, so the
// results are the same bit for bit. That loop split each expert's rows over
// the threads, and the serial work between its matmuls (gathers, SwiGLU,
// sums) left a thread idle: 128 experts of about 32 tokens each at pp512.
// (Largest experts first was 15-25 % slower: the pool's first claims are
// its largest, and they then held most of the work.) False, with nothing
// done, when an active expert is not a quantized orkpack tier.
bool Context::moe_prefill_fused(int layer, int n) {
  if (!fast_kernels_ || observer_ || npu_ != nullptr || n < 2) return false;
  const LayerWeights& L = model_.layer(layer);
  const int E = c_.n_embd, n_exp = c_.n_expert, k = c_.n_expert_used, ff = c_.n_ff_exp;
  // Each expert's routes (index t * k + slot), in token order: a counting sort.
  std::vector<int>& begin = moe_begin_;
  begin.assign(static_cast<size_t>(n_exp) + 1, 0);
  for (int i = 0; i < n * k; ++i) ++begin[static_cast<size_t>(route_ids_[static_cast<size_t>(i)]) + 1];
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
    const WeightView &g = L.gate_exps[ue], &u = L.up_exps[ue], &d = L.down_exps[ue];
    if (!integer_tier(g) || !integer_tier(u) || !integer_tier(d)) return false;
    // Signs looked up here: rotation_signs is not for several threads at once.
    auto signs = [&](const WeightView& w) {
      return w.rotation_block > 0 ? rotation_signs(w.k_stored, w.rotation_seed) : nullptr;
    };
    experts.push_back({e, m, signs(g), signs(u), signs(d)});
  }
  std::vector<int32_t>& routes = moe_tokens_;
  routes.resize(static_cast<size_t>(n) * k);
  {
    std::vector<int> next(begin.begin(), begin.end() - 1);
    for (int i = 0; i < n * k; ++i) {
      int& at = next[static_cast<size_t>(route_ids_[static_cast<size_t>(i)])];
      routes[static_cast<size_t>(at++)] = i;
    }
  }
  for (const Expert& x : experts) {
    const auto ue = static_cast<size_t>(x.e);
    moe_stats_.hits[static_cast<size_t>(layer) * n_exp + ue] += static_cast<uint64_t>(x.m);
    moe_stats_.expert_bytes += matrix_bytes(L.gate_exps[ue]) + matrix_bytes(L.up_exps[ue]) + matrix_bytes(L.down_exps[ue]);
  }
  moe_out_.resize(static_cast<size_t>(n) * k * E);  // by route
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
      const WeightView &g = L.gate_exps[ue], &u = L.up_exps[ue], &d = L.down_exps[ue];
      const int32_t* r = &routes[static_cast<size_t>(begin[ue])];
      const auto m = static_cast<size_t>(x.m);
      in.resize(m * E);
      for (size_t i = 0; i < m; ++i) std::copy_n(&xn_[static_cast<size_t>(r[i] / k) * E], E, &in[i * E]);
      auto prepare = [&](const float* src, int64_t cols, const WeightView& w, const float* signs) {
        const int64_t kw = w.k_stored;
        f32.resize(m * static_cast<size_t>(kw));
        codes.resize(m * static_cast<size_t>(kw));
        scales.resize(m);
        sums.resize(m);
        pad_rotate_quantize(src, x.m, cols, kw, w.rotation_block, signs, f32.data(), codes.data(), scales.data(),
                            sums.data());
        return QuantActs{codes.data(), scales.data(), sums.data(), kw, x.m};
      };
      const QuantActs gu = prepare(in.data(), E, g, x.gate_signs);
      gate.resize(m * ff);
      up.resize(m * ff);
      cpu::quant_matmul(quant_weights(g.tier_tensor(), i8s_high_only_), gu, gate.data(), ff, 0, ff);
      const bool same_basis = u.k_stored == g.k_stored && u.rotation_block == g.rotation_block &&
                              u.rotation_seed == g.rotation_seed;
      // An up projection stored in another basis than gate's gets its own
      // input, made in the same buffers once gate is done with them.
      const QuantActs ua = same_basis ? gu : prepare(in.data(), E, u, x.up_signs);
      cpu::quant_matmul(quant_weights(u.tier_tensor(), i8s_high_only_), ua, up.data(), ff, 0, ff);
      cpu::swiglu(gate.data(), up.data(), static_cast<int64_t>(m) * ff, gate.data());
      const QuantActs da = prepare(gate.data(), ff, d, x.down_signs);
      out.resize(m * E);
      cpu::quant_matmul(quant_weights(d.tier_tensor(), i8s_high_only_), da, out.data(), E, 0, E);
      for (size_t i = 0; i < m; ++i) std::copy_n(&out[i * E], E, &moe_out_[static_cast<size_t>(r[i]) * E]);
    }
  };
  pool_->run(static_cast<int64_t>(experts.size()), run_experts, 1, ThreadPool::Schedule::kShared);
  // Each token's slots summed in expert order (moe_acc_ starts at zero).
  pool_->run(
      n,
      [&](int64_t first, int64_t last) {
        thread_local std::vector<int> order;
        for (int64_t t = first; t < last; ++t) {
          const size_t at = static_cast<size_t>(t) * k;
          add_in_expert_order(&route_ids_[at], &route_w_[at], &moe_out_[at * E], k, E, &moe_acc_[static_cast<size_t>(t) * E],
                              order);
        }
      },
      8);
  ++moe_stats_.fused_prefill_layers;
  return true;
}

// The mixture-of-experts FFN of one layer on xn_ (n normalised tokens),
// leaving its output in xn_. Tokens are routed, grouped by expert, and each
// active expert runs once over all of its tokens (gate, up, SwiGLU, down),
// its rows split over the pool; the outputs are summed with the routing
// weights. Decode reads only the routed experts.
void Context::moe_ffn(int layer, int n) {
  const LayerWeights& L = model_.layer(layer);
  const int E = c_.n_embd, n_exp = c_.n_expert, k = c_.n_expert_used, ff = c_.n_ff_exp;
  router_logits_.resize(static_cast<size_t>(n) * n_exp);
  matmul(L.router, xn_.data(), n, router_logits_.data());
  route_ids_.resize(static_cast<size_t>(n) * k);
  route_w_.resize(static_cast<size_t>(n) * k);
  for (int t = 0; t < n; ++t) {
    route_token(&router_logits_[static_cast<size_t>(t) * n_exp], n_exp, k, c_.arch->norm_topk,
                &route_ids_[static_cast<size_t>(t) * k], &route_w_[static_cast<size_t>(t) * k]);
  }
  if (profile_) lap(Profile::kRouter, matrix_bytes(L.router));
  const uint64_t expert_bytes0 = moe_stats_.expert_bytes;
  if (moe_stats_.hits.empty()) {
    moe_stats_.n_layer = c_.n_layer;
    moe_stats_.n_expert = n_exp;
    moe_stats_.hits.assign(static_cast<size_t>(c_.n_layer) * n_exp, 0);
  }
  moe_acc_.assign(static_cast<size_t>(n) * E, 0.0f);
  std::vector<int32_t>& tokens = moe_tokens_;
  std::vector<float>& weights = moe_weights_;
  const bool fused = n == 1 ? moe_decode_fused(layer) : moe_prefill_fused(layer, n);
  for (int e = 0; e < (fused ? 0 : n_exp); ++e) {
    tokens.clear();
    weights.clear();
    for (int i = 0; i < n * k; ++i) {
      if (route_ids_[static_cast<size_t>(i)] == e) {
        tokens.push_back(i / k);
        weights.push_back(route_w_[static_cast<size_t>(i)]);
      }
    }
    if (tokens.empty()) continue;
    const int m = static_cast<int>(tokens.size());
    moe_stats_.hits[static_cast<size_t>(layer) * n_exp + e] += static_cast<uint64_t>(m);
    moe_stats_.expert_bytes += matrix_bytes(L.gate_exps[static_cast<size_t>(e)]) +
                               matrix_bytes(L.up_exps[static_cast<size_t>(e)]) +
                               matrix_bytes(L.down_exps[static_cast<size_t>(e)]);
    moe_in_.resize(static_cast<size_t>(m) * E);
    for (int j = 0; j < m; ++j) {
      std::copy_n(&xn_[static_cast<size_t>(tokens[static_cast<size_t>(j)]) * E], E, &moe_in_[static_cast<size_t>(j) * E]);
    }
    moe_gate_.resize(static_cast<size_t>(m) * ff);
    moe_up_.resize(static_cast<size_t>(m) * ff);
    moe_out_.resize(static_cast<size_t>(m) * E);
    matmul(L.gate_exps[static_cast<size_t>(e)], moe_in_.data(), m, moe_gate_.data());
    matmul(L.up_exps[static_cast<size_t>(e)], moe_in_.data(), m, moe_up_.data());
    swiglu(moe_gate_.data(), moe_up_.data(), static_cast<int64_t>(m) * ff, moe_gate_.data());
    matmul(L.down_exps[static_cast<size_t>(e)], moe_gate_.data(), m, moe_out_.data());
    for (int j = 0; j < m; ++j) {
      add_scaled(weights[static_cast<size_t>(j)], &moe_out_[static_cast<size_t>(j) * E], E,
                 &moe_acc_[static_cast<size_t>(tokens[static_cast<size_t>(j)]) * E]);
    }
  }
  // (The fused decode lapped its two loops itself.)
  if (profile_ && !(fused && n == 1)) lap(Profile::kExpertsDown, moe_stats_.expert_bytes - expert_bytes0);
  if (c_.arch->shared_expert) {
    // qwen2moe: + sigmoid(g . x) * shared_expert(x), per token.
    const int sff = c_.n_ff_shexp;
    moe_gate_.resize(static_cast<size_t>(n) * sff);
    moe_up_.resize(static_cast<size_t>(n) * sff);
    moe_out_.resize(static_cast<size_t>(n) * E);
    matmul(L.gate_shexp, xn_.data(), n, moe_gate_.data());
    matmul(L.up_shexp, xn_.data(), n, moe_up_.data());
    swiglu(moe_gate_.data(), moe_up_.data(), static_cast<int64_t>(n) * sff, moe_gate_.data());
    matmul(L.down_shexp, moe_gate_.data(), n, moe_out_.data());
    for (int t = 0; t < n; ++t) {
      const float* xt = &xn_[static_cast<size_t>(t) * E];
      double g = 0.0;
      for (int i = 0; i < E; ++i) g += static_cast<double>(L.shexp_gate[static_cast<size_t>(i)]) * xt[i];
      const auto scale = static_cast<float>(1.0 / (1.0 + std::exp(-g)));
      add_scaled(scale, &moe_out_[static_cast<size_t>(t) * E], E, &moe_acc_[static_cast<size_t>(t) * E]);
    }
  }
  std::copy(moe_acc_.begin(), moe_acc_.end(), xn_.begin());
  if (profile_ && c_.arch->shared_expert) {
    lap(Profile::kSharedExpert, matrix_bytes(L.gate_shexp) + matrix_bytes(L.up_shexp) + matrix_bytes(L.down_shexp));
  }
}

}  // namespace ork
