// The mixture-of-experts feed-forward of the forward pass (forward.cc):
// routing, then the routed experts - through the dispatcher, which fuses
// them on the CPU where it can - or one expert at a time, and qwen2moe's
// shared expert.
#include <algorithm>
#include <cmath>
#include <mutex>

#include "model/forward.h"
#include "model/moe.h"

namespace ork {
namespace {

// acc (n floats) += w * out: one routed expert's share of a token's output.
void add_scaled(float w, const float* out, int64_t n, float* acc) {
  for (int64_t i = 0; i < n; ++i) acc[i] += w * out[i];
}

}  // namespace

// The mixture-of-experts FFN of one layer on xn_ (n normalised tokens),
// leaving its output in xn_. Tokens are routed, grouped by expert, and each
// active expert runs once over all of its tokens (gate, up, SwiGLU, down);
// the outputs are summed with the routing weights in the order of the
// experts' ids. Decode reads only the routed experts.
Status Context::moe_ffn(int layer, int n) {
  const LayerWeights& L = model_.layer(layer);
  const int E = c_.n_embd, n_exp = c_.n_expert, k = c_.n_expert_used;
  router_logits_.resize(static_cast<size_t>(n) * n_exp);
  ORK_RETURN_IF_ERROR(matmul(L.router, xn_.data(), n, router_logits_.data()));
  route_ids_.resize(static_cast<size_t>(n) * k);
  route_w_.resize(static_cast<size_t>(n) * k);
  const Routing routing{c_.gating, c_.arch->norm_topk, L.expert_bias.empty() ? nullptr : L.expert_bias.data()};
  for (int t = 0; t < n; ++t) {
    route_token(&router_logits_[static_cast<size_t>(t) * n_exp], n_exp, k, routing,
                &route_ids_[static_cast<size_t>(t) * k], &route_w_[static_cast<size_t>(t) * k]);
  }
  lap(Profile::kRouter, matrix_bytes(L.router));
  if (moe_stats_.hits.empty()) {
    moe_stats_.n_layer = c_.n_layer;
    moe_stats_.n_expert = n_exp;
    moe_stats_.hits.assign(static_cast<size_t>(c_.n_layer) * n_exp, 0);
  }
  // Usage and bytes: each active expert's matrices are read once per batch.
  uint64_t* hits = &moe_stats_.hits[static_cast<size_t>(layer) * n_exp];
  std::vector<int32_t>& tokens = moe_tokens_;
  tokens.assign(static_cast<size_t>(n_exp), 0);
  for (int i = 0; i < n * k; ++i) ++tokens[static_cast<size_t>(route_ids_[static_cast<size_t>(i)])];
  uint64_t gate_up_bytes = 0, down_bytes = 0;
  for (int e = 0; e < n_exp; ++e) {
    if (tokens[static_cast<size_t>(e)] == 0) continue;
    hits[e] += static_cast<uint64_t>(tokens[static_cast<size_t>(e)]);
    gate_up_bytes += matrix_bytes(L.gate_exps[static_cast<size_t>(e)]) + matrix_bytes(L.up_exps[static_cast<size_t>(e)]);
    down_bytes += matrix_bytes(L.down_exps[static_cast<size_t>(e)]);
  }
  moe_stats_.expert_bytes += gate_up_bytes + down_bytes;
  moe_acc_.assign(static_cast<size_t>(n) * E, 0.0f);
  bool fused = false;
  if (model_.expert_cache() != nullptr) {
    ORK_RETURN_IF_ERROR(cached_experts(layer, n, gate_up_bytes, down_bytes, &fused));
  } else {
    ORK_RETURN_IF_ERROR(
        run_experts(n, L.gate_exps, L.up_exps, L.down_exps, !observer_, nullptr, gate_up_bytes, down_bytes, &fused));
  }
  // (The fused decode lapped its two loops itself.)
  if (!(fused && n == 1)) lap(Profile::kExpertsDown, gate_up_bytes + down_bytes);
  if (c_.arch->shared_expert) {
    // qwen2moe: + sigmoid(g . x) * shared_expert(x), per token.
    const int sff = c_.n_ff_shexp;
    moe_gate_.resize(static_cast<size_t>(n) * sff);
    moe_up_.resize(static_cast<size_t>(n) * sff);
    moe_out_.resize(static_cast<size_t>(n) * E);
    ORK_RETURN_IF_ERROR(
        matmul_shared({{&L.gate_shexp, moe_gate_.data()}, {&L.up_shexp, moe_up_.data()}}, xn_.data(), n));
    ops_.swiglu(moe_gate_.data(), moe_up_.data(), static_cast<int64_t>(n) * sff, moe_gate_.data());
    ORK_RETURN_IF_ERROR(matmul(L.down_shexp, moe_gate_.data(), n, moe_out_.data()));
    for (int t = 0; t < n; ++t) {
      const float* xt = &xn_[static_cast<size_t>(t) * E];
      double g = 0.0;
      for (int i = 0; i < E; ++i) g += static_cast<double>(L.shexp_gate[static_cast<size_t>(i)]) * xt[i];
      const auto scale = static_cast<float>(1.0 / (1.0 + std::exp(-g)));
      add_scaled(scale, &moe_out_[static_cast<size_t>(t) * E], E, &moe_acc_[static_cast<size_t>(t) * E]);
    }
    lap(Profile::kSharedExpert, matrix_bytes(L.gate_shexp) + matrix_bytes(L.up_shexp) + matrix_bytes(L.down_shexp));
  }
  std::copy(moe_acc_.begin(), moe_acc_.end(), xn_.begin());
  return Status::ok();
}

Status Context::run_experts(int n, const std::vector<WeightView>& gate, const std::vector<WeightView>& up,
                            const std::vector<WeightView>& down, bool may_fuse, const std::vector<int32_t>* which,
                            uint64_t gate_up_bytes, uint64_t down_bytes, bool* fused, const Arriving* arriving) {
  const int E = c_.n_embd, n_exp = c_.n_expert, k = c_.n_expert_used, ff = c_.n_ff_exp;
  *fused = false;
  if (may_fuse) {
    // The fused paths read every matmul of a layer in two loops: an
    // observer, which must see each matmul, takes the loop below.
    ExpertsCall call;
    call.gate = gate;
    call.up = up;
    call.down = down;
    call.ids = route_ids_.data();
    call.weights = route_w_.data();
    call.n = n;
    call.k = k;
    call.n_embd = E;
    call.n_ff = ff;
    call.x = xn_.data();
    call.acc = moe_acc_.data();
    if (n == 1) call.after_gate_up = [&] { lap(Profile::kExpertsGateUp, gate_up_bytes); };
    if (arriving != nullptr) {
      call.present = arriving->present;
      call.await = arriving->await;
    }
    ORK_ASSIGN_OR_RETURN(*fused, dispatch_.experts(call));
    if (*fused && n == 1) lap(Profile::kExpertsDown, down_bytes);
    if (*fused && n == 1) ++moe_stats_.fused_layers;
    if (*fused && n > 1) ++moe_stats_.fused_prefill_layers;
    if (*fused) return Status::ok();
  }
  if (arriving != nullptr) ORK_RETURN_IF_ERROR(arriving->await_all());
  const std::vector<int32_t>& tokens = moe_tokens_;
  std::vector<float>& weights = moe_weights_;
  std::vector<int32_t> rows;
  const size_t count = which != nullptr ? which->size() : static_cast<size_t>(n_exp);
  for (size_t i = 0; i < count; ++i) {
    const int e = which != nullptr ? (*which)[i] : static_cast<int>(i);
    if (tokens[static_cast<size_t>(e)] == 0) continue;
    rows.clear();
    weights.clear();
    for (int j = 0; j < n * k; ++j) {
      if (route_ids_[static_cast<size_t>(j)] == e) {
        rows.push_back(j / k);
        weights.push_back(route_w_[static_cast<size_t>(j)]);
      }
    }
    const int m = static_cast<int>(rows.size());
    moe_in_.resize(static_cast<size_t>(m) * E);
    for (int j = 0; j < m; ++j) {
      std::copy_n(&xn_[static_cast<size_t>(rows[static_cast<size_t>(j)]) * E], E, &moe_in_[static_cast<size_t>(j) * E]);
    }
    moe_gate_.resize(static_cast<size_t>(m) * ff);
    moe_up_.resize(static_cast<size_t>(m) * ff);
    moe_out_.resize(static_cast<size_t>(m) * E);
    const auto ue = static_cast<size_t>(e);
    ORK_RETURN_IF_ERROR(matmul(gate[ue], moe_in_.data(), m, moe_gate_.data()));
    ORK_RETURN_IF_ERROR(matmul(up[ue], moe_in_.data(), m, moe_up_.data()));
    ops_.swiglu(moe_gate_.data(), moe_up_.data(), static_cast<int64_t>(m) * ff, moe_gate_.data());
    ORK_RETURN_IF_ERROR(matmul(down[ue], moe_gate_.data(), m, moe_out_.data()));
    for (int j = 0; j < m; ++j) {
      add_scaled(weights[static_cast<size_t>(j)], &moe_out_[static_cast<size_t>(j) * E], E,
                 &moe_acc_[static_cast<size_t>(rows[static_cast<size_t>(j)]) * E]);
    }
  }
  return Status::ok();
}

Status Context::cached_experts(int layer, int n, uint64_t gate_up_bytes, uint64_t down_bytes, bool* fused) {
  ExpertCache& cache = *model_.expert_cache();
  const LayerWeights& L = model_.layer(layer);
  const int n_exp = c_.n_expert, k = c_.n_expert_used;
  if (exp_gate_.size() != static_cast<size_t>(n_exp)) {
    exp_gate_ = L.gate_exps;
    exp_up_ = L.up_exps;
    exp_down_ = L.down_exps;
  }
  active_.clear();
  for (int e = 0; e < n_exp; ++e) {
    if (moe_tokens_[static_cast<size_t>(e)] > 0) active_.push_back(e);
  }
  // The experts go through the cache in groups it can hold beside another
  // sequence's layer: all at once when they fit (a token's k, a short
  // batch's few), which the fused paths then take; else a group at a time
  // through the one-expert loop, in ascending order, so every token sums
  // its experts in the same order as the resident model does.
  const size_t group = static_cast<size_t>(std::max(k, cache.capacity() - k));
  *fused = false;
  for (size_t at = 0; at < active_.size(); at += group) {
    const size_t end = std::min(active_.size(), at + group);
    group_.assign(active_.begin() + static_cast<std::ptrdiff_t>(at), active_.begin() + static_cast<std::ptrdiff_t>(end));
    ORK_RETURN_IF_ERROR(cache.request(layer, group_));
    if (n == 1) prefetch_next_layer(layer);
    const bool whole = at == 0 && end == active_.size();
    Status st = Status::ok();
    if (whole && n == 1 && !observer_) {
      // Decode: the experts present are computed while the rest arrive,
      // each awaited by the thread about to read it. A read that fails
      // leaves its rows wrong and its error here, returned after the loops.
      st = cache.lend(layer, group_, exp_gate_, exp_up_, exp_down_);
      std::mutex failed_mu;
      Status failed = Status::ok();
      Arriving arriving;
      arriving.present = [&](int e) { return cache.present(layer, e); };
      arriving.await = [&](int e) {
        if (Status s = cache.await_one(layer, e); !s.is_ok()) {
          std::lock_guard lock(failed_mu);
          if (failed.is_ok()) failed = std::move(s);
        }
      };
      arriving.await_all = [&] { return cache.wait(layer, group_, exp_gate_, exp_up_, exp_down_); };
      if (st.is_ok()) {
        st = run_experts(n, exp_gate_, exp_up_, exp_down_, true, &group_, gate_up_bytes, down_bytes, fused, &arriving);
      }
      if (st.is_ok()) st = failed;
    } else {
      // A batch, or a layer in groups: every expert of the group is in
      // before any is computed.
      st = cache.wait(layer, group_, exp_gate_, exp_up_, exp_down_);
      if (st.is_ok()) {
        st = run_experts(n, exp_gate_, exp_up_, exp_down_, whole && !observer_, &group_, gate_up_bytes, down_bytes,
                         fused);
      }
    }
    cache.release(layer, group_);
    ORK_RETURN_IF_ERROR(st);
  }
  return Status::ok();
}

void Context::prefetch_next_layer(int layer) {
  int next = layer + 1;
  while (next < c_.n_layer && !c_.moe_layer(next)) ++next;
  if (next >= c_.n_layer) return;
  // The next layer's router applied to this layer's input: the hidden
  // state changes little from one layer to the next, so its top k is a
  // good guess at what the next layer will route to. A guess only: the
  // next layer routes on its own input, and reads whatever was missed.
  const LayerWeights& N = model_.layer(next);
  const int n_exp = c_.n_expert, k = c_.n_expert_used;
  pred_logits_.resize(static_cast<size_t>(n_exp));
  if (!dispatch_.matmul(N.router, xn_.data(), 1, pred_logits_.data()).is_ok()) return;
  pred_ids_.resize(static_cast<size_t>(k));
  pred_w_.resize(static_cast<size_t>(k));
  const Routing routing{c_.gating, c_.arch->norm_topk, N.expert_bias.empty() ? nullptr : N.expert_bias.data()};
  route_token(pred_logits_.data(), n_exp, k, routing, pred_ids_.data(), pred_w_.data());
  model_.expert_cache()->prefetch(next, pred_ids_);
}

}  // namespace ork
