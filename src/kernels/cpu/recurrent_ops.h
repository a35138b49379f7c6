// The CPU engine's kernels for the token mixers that are not attention:
// LFM2's gated short convolution (written once with Highway, like
// float_ops.h). Reference: ref::short_conv; tests in
// tests/kernels/recurrent_ops_test.cc.
#pragma once

#include <cstdint>

namespace ork::cpu {

// ref::short_conv: u_t = B_t * X_t, out_t = C_t * sum_i w[i] * u_{t-(taps-1)+i},
// the taps summed in order with fused multiply-adds in f32. Each channel of
// each token is computed the same way wherever it falls in a batch, so a
// batch and its tokens one at a time agree bit for bit.
void short_conv(const float* bcx, int n, int width, const float* w, int taps, const float* history, float* u,
                float* out);

}  // namespace ork::cpu
