// The gated DeltaNet layer of Qwen3.5 (qwen35, qwen35moe), beside the
// attention layer of forward.cc:
//   m = attn_qkv(norm(x)), z = attn_gate(..), b = ssm_beta(..), a = ssm_alpha(..)
//   q, k, v = silu(causal conv(m)), the conv reading the sequence's last
//             ssm_conv_kernel - 1 inputs m
//   per v-head: beta = sigmoid(b), decay = exp(A softplus(a + dt_bias)),
//               the delta rule over the head's state (HostOps::delta_net)
//   x += ssm_out(rmsnorm(o) * ssm_norm * silu(z))
// Each sequence's states start at zero at position 0 and go forward only:
// truncating below n_past goes back to the copy kept at the end of the last
// batch of two or more tokens when it is at or before the point, else starts
// over (Context::truncate, Context::advance).
#include <algorithm>
#include <cmath>

#include "model/forward.h"

namespace ork {
namespace {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace

Status Context::delta_block(int il, int n) {
  const LayerWeights& L = model_.layer(il);
  const int E = c_.n_embd, taps = c_.ssm_conv_kernel, nv = c_.ssm_v_heads;
  const auto qkv = static_cast<size_t>(c_.ssm_qkv_dim()), inner = static_cast<size_t>(c_.ssm_inner());
  const auto unv = static_cast<size_t>(nv);
  ops_.rms_norm_rows(x_.data(), L.attn_norm.data(), n, E, c_.rms_eps, xn_.data());
  ORK_RETURN_IF_ERROR(matmul_shared({{&L.ssm_qkv, dqkv_.data()}, {&L.ssm_gate, dz_.data()}, {&L.ssm_beta, dbeta_.data()},
                                     {&L.ssm_alpha, dalpha_.data()}},
                                    xn_.data(), n));
  lap(Profile::kDeltaIn,
      matrix_bytes(L.ssm_qkv) + matrix_bytes(L.ssm_gate) + matrix_bytes(L.ssm_beta) + matrix_bytes(L.ssm_alpha));
  for (size_t t = 0; t < static_cast<size_t>(n); ++t) {
    for (size_t j = 0; j < unv; ++j) {
      float& b = dbeta_[t * unv + j];
      b = 1.0f / (1.0f + std::exp(-b));
      ddecay_[t * unv + j] = std::exp(L.ssm_a[j] * softplus(dalpha_[t * unv + j] + L.ssm_dt_bias[j]));
    }
  }
  const size_t slot = static_cast<size_t>(c_.delta_slot[static_cast<size_t>(il)]);
  const size_t state_floats = unv * static_cast<size_t>(c_.ssm_k_dim) * static_cast<size_t>(c_.ssm_v_dim);
  const size_t hist_rows = static_cast<size_t>(taps - 1);
  for (const Segment& seg : segments_) {
    Context& ctx = *seg.ctx;
    float* state = &ctx.delta_state_[slot * state_floats];
    float* conv = &ctx.delta_conv_[slot * hist_rows * qkv];
    if (ctx.n_past_ == 0) {  // a sequence's first tokens: nothing before them
      std::fill_n(state, state_floats, 0.0f);
      std::fill_n(conv, hist_rows * qkv, 0.0f);
    }
    const size_t r0 = static_cast<size_t>(seg.row0), sn = static_cast<size_t>(seg.n);
    ops_.conv_silu(&dqkv_[r0 * qkv], seg.n, static_cast<int>(qkv), L.ssm_conv_w.data(), taps, conv, &dconv_[r0 * qkv]);
    // The convolution's last inputs: the newest taps - 1 rows of [history |
    // batch], oldest first - the kept old rows moved down in place, then the
    // batch's newest rows after them.
    const size_t keep = sn < hist_rows ? hist_rows - sn : 0;
    std::copy_n(conv + (hist_rows - keep) * qkv, keep * qkv, conv);
    std::copy_n(&dqkv_[(r0 + sn - (hist_rows - keep)) * qkv], (hist_rows - keep) * qkv, conv + keep * qkv);
    DeltaNetArgs a;
    a.state = state;
    a.n_k_heads = c_.ssm_k_heads;
    a.n_v_heads = nv;
    a.k_dim = c_.ssm_k_dim;
    a.v_dim = c_.ssm_v_dim;
    a.n_tokens = seg.n;
    a.qkv = &dconv_[r0 * qkv];
    a.qkv_stride = static_cast<int64_t>(qkv);
    a.beta = &dbeta_[r0 * unv];
    a.decay = &ddecay_[r0 * unv];
    a.out = &dout_[r0 * inner];
    ops_.delta_net(a);
  }
  // Per segment the state read and written, the convolution's history read
  // (as Context::recurrent_bytes_per_token counts them).
  lap(Profile::kDeltaState, segments_.size() * (2 * state_floats + hist_rows * qkv) * sizeof(float));
  // rmsnorm(o) * ssm_norm per v-head, times silu(z).
  ops_.rms_norm_rows(dout_.data(), L.ssm_norm.data(), n * nv, c_.ssm_v_dim, c_.rms_eps, dout_.data());
  ops_.swiglu(dz_.data(), dout_.data(), static_cast<int64_t>(n) * static_cast<int64_t>(inner), dout_.data());
  ORK_RETURN_IF_ERROR(matmul(L.ssm_out, dout_.data(), n, xn_.data()));
  for (size_t i = 0; i < static_cast<size_t>(n) * static_cast<size_t>(E); ++i) x_[i] += xn_[i];
  lap(Profile::kDeltaOut, matrix_bytes(L.ssm_out));
  return Status::ok();
}

}  // namespace ork
