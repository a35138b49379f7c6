#include "quant/gptq.h"

#include <cmath>

namespace ork {
namespace {

// Row-major k x k as a view with the rows named.
inline double* row_of(std::vector<double>& a, int64_t k, int64_t i) { return a.data() + i * k; }

// In-place lower Cholesky factor of a k x k symmetric matrix (only its lower
// triangle is read; the upper is zeroed); false if it is not positive
// definite. Every inner loop is a dot product of two rows' leading parts,
// contiguous, so it vectorises (the factor is k^3 / 6 multiply-adds: most
// of a GPTQ pack's time before it did).
bool cholesky(std::vector<double>& a, int64_t k) {
  for (int64_t j = 0; j < k; ++j) {
    const double* aj = row_of(a, k, j);
    double sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int64_t p = 0; p < j; ++p) sq += aj[p] * aj[p];
    double d = aj[j] - sq;
    if (!(d > 0)) return false;
    d = std::sqrt(d);
    row_of(a, k, j)[j] = d;
    for (int64_t i = j + 1; i < k; ++i) {
      const double* ai = row_of(a, k, i);
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t p = 0; p < j; ++p) s += ai[p] * aj[p];
      row_of(a, k, i)[j] = (ai[j] - s) / d;
    }
  }
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = i + 1; j < k; ++j) row_of(a, k, i)[j] = 0;
  }
  return true;
}

// X = L^-1 for a lower-triangular L (lower too), a row at a time: row i of
// X L = e_i gives, from the diagonal leftwards, X[i][j] = (δ_ij - sum over
// p in (j, i] of X[i][p] L[p][j]) / L[j][j] - read through L's transpose so
// that both operands of the sum run along rows.
std::vector<double> lower_inverse(const std::vector<double>& l, int64_t k) {
  std::vector<double> lt(static_cast<size_t>(k * k));
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j <= i; ++j) lt[static_cast<size_t>(j * k + i)] = l[static_cast<size_t>(i * k + j)];
  }
  std::vector<double> x(static_cast<size_t>(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i) {
    double* xi = row_of(x, k, i);
    xi[i] = 1.0 / l[static_cast<size_t>(i * k + i)];
    for (int64_t j = i - 1; j >= 0; --j) {
      const double* ltj = lt.data() + j * k;
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t p = j + 1; p <= i; ++p) s += xi[p] * ltj[p];
      xi[j] = -s / ltj[j];
    }
  }
  return x;
}

}  // namespace

// GPTQ wants U upper with (H + damping)^-1 = U^T U. With J the reversal of
// the indices, the Cholesky factor M of J H J (lower) gives H = R R^T for the
// upper R = J M J, so H^-1 = (R^-1)^T R^-1 and U = R^-1 = J M^-1 J: one
// factor and one triangular inverse (k^3 / 3 in all), where inverting H and
// factoring the inverse took about four times that.
std::vector<double> gptq_factor(const std::vector<double>& h, int64_t ks) {
  double mean_diag = 0;
  for (int64_t i = 0; i < ks; ++i) mean_diag += h[static_cast<size_t>(i * ks + i)];
  mean_diag /= static_cast<double>(ks);
  if (!(mean_diag > 0)) return {};
  const auto at = [ks](int64_t i, int64_t j) { return static_cast<size_t>(i * ks + j); };
  for (double damp = 0.01; damp < 10; damp *= 10) {
    std::vector<double> m(static_cast<size_t>(ks * ks));
    for (int64_t i = 0; i < ks; ++i) {
      for (int64_t j = 0; j < ks; ++j) m[at(i, j)] = h[at(ks - 1 - i, ks - 1 - j)];
      m[at(i, i)] += damp * mean_diag;
    }
    if (!cholesky(m, ks)) continue;
    const std::vector<double> minv = lower_inverse(m, ks);
    std::vector<double> u(static_cast<size_t>(ks * ks), 0.0);
    for (int64_t i = 0; i < ks; ++i) {
      for (int64_t j = i; j < ks; ++j) u[at(i, j)] = minv[at(ks - 1 - i, ks - 1 - j)];
    }
    return u;
  }
  return {};
}

}  // namespace ork
