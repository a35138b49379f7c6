#include "kernels/ref/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "format/gguf/dequant.h"
#include "quant/rotation.h"

namespace ork::ref {

void rms_norm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, int64_t row_begin, int64_t row_end) {
  // Inputs in the weights' stored space: padded to k_stored and rotated.
  const int64_t k = w.is_tier ? w.k_stored : w.cols;
  thread_local std::vector<float> xs, row;
  xs.assign(static_cast<size_t>(n_tokens * k), 0.0f);
  row.resize(static_cast<size_t>(k));
  for (int64_t m = 0; m < n_tokens; ++m) {
    std::copy_n(x + m * w.cols, w.cols, &xs[static_cast<size_t>(m * k)]);
    if (w.rotation_block > 0) rotate(&xs[static_cast<size_t>(m * k)], k, w.rotation_block, w.rotation_seed);
  }
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* wr = row.data();
    if (w.is_tier) {
      dequantize_tier_row(w.tier_tensor(), r, row.data());
    } else if (w.type == GgmlType::kF32) {
      wr = reinterpret_cast<const float*>(w.data + static_cast<uint64_t>(r) * w.row_bytes);
    } else {
      (void)dequantize(w.type, w.data + static_cast<uint64_t>(r) * w.row_bytes, row.data(), w.cols);
    }
    for (int64_t m = 0; m < n_tokens; ++m) {
      const float* xm = &xs[static_cast<size_t>(m * k)];
      double sum = 0.0;
      for (int64_t j = 0; j < k; ++j) sum += static_cast<double>(wr[j]) * xm[j];
      y[m * w.rows + r] = static_cast<float>(sum);
    }
  }
}

namespace {

// cos and sin of pair i's angle: theta_i = pos * base^(-2i / n_rot), as
// llama.cpp defines it, divided by the pair's frequency factor if any.
void rope_angle(int64_t pos, int i, const RopeParams& p, float* c, float* s) {
  const double position = static_cast<double>(pos) * p.freq_scale;
  double theta = position * std::pow(static_cast<double>(p.freq_base), -2.0 * i / p.n_rot);
  if (p.freq_factors != nullptr) theta /= p.freq_factors[i];
  *c = static_cast<float>(std::cos(theta));
  *s = static_cast<float>(std::sin(theta));
}

}  // namespace

void rope_table(int64_t pos, const RopeParams& p, float* cos, float* sin) {
  for (int i = 0; i < p.n_rot / 2; ++i) rope_angle(pos, i, p, &cos[i], &sin[i]);
}

void rope(float* head, int head_dim, int64_t pos, const RopeParams& p) {
  const int half = p.n_rot / 2;
  for (int i = 0; i < half; ++i) {
    float c, s;
    rope_angle(pos, i, p, &c, &s);
    const int a = p.type == RopeType::kNorm ? 2 * i : i;
    const int b = p.type == RopeType::kNorm ? 2 * i + 1 : i + half;
    const float x0 = head[a];
    const float x1 = head[b];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
  }
  (void)head_dim;
}

void softmax(float* x, int64_t n) {
  const float max = *std::max_element(x, x + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const auto inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void geglu(const float* gate, const float* up, int64_t n, float* out) {
  const double c = std::sqrt(2.0 / 3.14159265358979323846);
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(0.5 * g * (1.0 + std::tanh(c * (g + 0.044715 * g * g * g))) * up[i]);
  }
}

void attention_head(const float* q, const float* k, const float* v, int64_t n_kv, int head_dim, int64_t stride,
                    float scale, float* scores, float* out) {
  for (int64_t t = 0; t < n_kv; ++t) {
    double dot = 0.0;
    const float* kt = k + t * stride;
    for (int d = 0; d < head_dim; ++d) dot += static_cast<double>(q[d]) * kt[d];
    scores[t] = static_cast<float>(dot) * scale;
  }
  softmax(scores, n_kv);
  for (int d = 0; d < head_dim; ++d) {
    double acc = 0.0;
    for (int64_t t = 0; t < n_kv; ++t) acc += static_cast<double>(scores[t]) * v[t * stride + d];
    out[d] = static_cast<float>(acc);
  }
}

namespace {

// Channel j of token t of a causal depthwise convolution, in double: the
// taps over x's rows, those before the batch from `history`.
double causal_taps(const float* x, const float* history, const float* w, int taps, size_t W, int t, size_t j) {
  double acc = 0.0;
  for (int i = 0; i < taps; ++i) {
    const int src = t - (taps - 1) + i;  // the token this tap reads, batch-relative
    const float xi = src >= 0 ? x[static_cast<size_t>(src) * W + j] : history[static_cast<size_t>(taps - 1 + src) * W + j];
    acc += static_cast<double>(w[static_cast<size_t>(i) * W + j]) * xi;
  }
  return acc;
}

}  // namespace

void short_conv(const float* bcx, int n, int width, const float* w, int taps, const float* history, float* u,
                float* out) {
  const auto W = static_cast<size_t>(width);
  for (size_t t = 0; t < static_cast<size_t>(n); ++t) {
    for (size_t j = 0; j < W; ++j) u[t * W + j] = bcx[t * 3 * W + j] * bcx[t * 3 * W + 2 * W + j];
  }
  for (int t = 0; t < n; ++t) {
    for (size_t j = 0; j < W; ++j) {
      const double acc = causal_taps(u, history, w, taps, W, t, j);
      out[static_cast<size_t>(t) * W + j] = bcx[static_cast<size_t>(t) * 3 * W + W + j] * static_cast<float>(acc);
    }
  }
}

void conv_silu(const float* x, int n, int width, const float* w, int taps, const float* history, float* out) {
  const auto W = static_cast<size_t>(width);
  for (int t = 0; t < n; ++t) {
    for (size_t j = 0; j < W; ++j) {
      const double acc = causal_taps(x, history, w, taps, W, t, j);
      out[static_cast<size_t>(t) * W + j] = static_cast<float>(acc / (1.0 + std::exp(-acc)));
    }
  }
}

namespace {

// 1 / max(|x|, 1e-6) over n values.
double inverse_l2(const float* x, int n) {
  double ss = 0.0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  return 1.0 / std::max(std::sqrt(ss), 1e-6);
}

}  // namespace

void delta_rule(float* S, int k_dim, int v_dim, int n, const float* q, const float* k, const float* v, int64_t stride,
                const float* beta, const float* decay, int64_t gate_stride, float scale, float* out,
                int64_t out_stride) {
  const auto V = static_cast<size_t>(v_dim);
  std::vector<double> kt(static_cast<size_t>(k_dim)), qt(static_cast<size_t>(k_dim)), sk(V), acc(V);
  for (int t = 0; t < n; ++t) {
    const float* qr = q + t * stride;
    const float* kr = k + t * stride;
    const float* vr = v + t * stride;
    const double qn = inverse_l2(qr, k_dim), kn = inverse_l2(kr, k_dim);
    for (int i = 0; i < k_dim; ++i) {
      qt[static_cast<size_t>(i)] = qr[i] * qn;
      kt[static_cast<size_t>(i)] = kr[i] * kn;
    }
    const double d = decay[t * gate_stride], b = beta[t * gate_stride];
    std::fill(sk.begin(), sk.end(), 0.0);
    for (size_t i = 0; i < static_cast<size_t>(k_dim); ++i) {
      for (size_t j = 0; j < V; ++j) {
        S[i * V + j] = static_cast<float>(S[i * V + j] * d);
        sk[j] += kt[i] * S[i * V + j];
      }
    }
    float* o = out + t * out_stride;
    for (size_t j = 0; j < V; ++j) sk[j] = b * (vr[j] - sk[j]);  // v'
    std::fill(acc.begin(), acc.end(), 0.0);
    for (size_t i = 0; i < static_cast<size_t>(k_dim); ++i) {
      for (size_t j = 0; j < V; ++j) {
        S[i * V + j] = static_cast<float>(S[i * V + j] + kt[i] * sk[j]);
        acc[j] += qt[i] * S[i * V + j];
      }
    }
    for (size_t j = 0; j < V; ++j) o[j] = static_cast<float>(acc[j] * scale);
  }
}

}  // namespace ork::ref
