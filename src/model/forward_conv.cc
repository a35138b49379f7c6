// The short-convolution layer of the hybrid families (lfm2), beside the
// attention layer of forward.cc: x += out_proj(C * conv(B * X)) with B, C, X
// = in_proj(norm(x)), the depthwise causal convolution reading the last
// conv_kernel - 1 inputs u = B * X of the sequence from the Context's
// window, which this layer then extends.
#include <algorithm>

#include "model/forward.h"

namespace ork {

Status Context::conv_block(int il, int n) {
  const LayerWeights& L = model_.layer(il);
  const int E = c_.n_embd, taps = c_.conv_kernel;
  const auto uE = static_cast<size_t>(E);
  const size_t window = conv_window();
  ops_.rms_norm_rows(x_.data(), L.attn_norm.data(), n, E, c_.rms_eps, xn_.data());
  ORK_RETURN_IF_ERROR(matmul(L.conv_in, xn_.data(), n, bcx_.data()));
  const size_t slot = static_cast<size_t>(c_.conv_slot[static_cast<size_t>(il)]);
  for (const Segment& seg : segments_) {
    Context& ctx = *seg.ctx;
    float* ring = &ctx.conv_ring_[slot * window * uE];
    // The inputs before this batch, oldest first (zeros before position 0).
    for (int i = 0; i < taps - 1; ++i) {
      const int pos = ctx.n_past_ - (taps - 1) + i;
      float* row = &conv_history_[static_cast<size_t>(i) * uE];
      if (pos < 0) {
        std::fill_n(row, uE, 0.0f);
      } else {
        std::copy_n(&ring[static_cast<size_t>(pos) % window * uE], uE, row);
      }
    }
    const size_t r0 = static_cast<size_t>(seg.row0);
    ops_.short_conv(&bcx_[r0 * 3 * uE], seg.n, E, L.conv_w.data(), taps, conv_history_.data(), &conv_u_[r0 * uE],
                    &conv_y_[r0 * uE]);
    // This batch's inputs into the window (only the last `window` matter).
    for (int t = std::max(0, seg.n - static_cast<int>(window)); t < seg.n; ++t) {
      const size_t pos = static_cast<size_t>(ctx.n_past_ + t);
      std::copy_n(&conv_u_[(r0 + static_cast<size_t>(t)) * uE], uE, &ring[pos % window * uE]);
    }
  }
  ORK_RETURN_IF_ERROR(matmul(L.conv_out, conv_y_.data(), n, xn_.data()));
  for (size_t i = 0; i < static_cast<size_t>(n) * uE; ++i) x_[i] += xn_[i];
  lap(Profile::kConv, matrix_bytes(L.conv_in) + matrix_bytes(L.conv_out));
  return Status::ok();
}

}  // namespace ork
