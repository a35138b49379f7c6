#include "quant/gptq.h"

#include <cmath>

namespace ork {
namespace {

// In-place lower Cholesky factor of a k x k symmetric matrix; false if it
// is not positive definite.
bool cholesky(std::vector<double>& a, int64_t k) {
  for (int64_t j = 0; j < k; ++j) {
    double d = a[static_cast<size_t>(j * k + j)];
    for (int64_t p = 0; p < j; ++p) d -= a[static_cast<size_t>(j * k + p)] * a[static_cast<size_t>(j * k + p)];
    if (!(d > 0)) return false;
    d = std::sqrt(d);
    a[static_cast<size_t>(j * k + j)] = d;
    for (int64_t i = j + 1; i < k; ++i) {
      double s = a[static_cast<size_t>(i * k + j)];
      for (int64_t p = 0; p < j; ++p) s -= a[static_cast<size_t>(i * k + p)] * a[static_cast<size_t>(j * k + p)];
      a[static_cast<size_t>(i * k + j)] = s / d;
    }
    for (int64_t i = 0; i < j; ++i) a[static_cast<size_t>(i * k + j)] = 0;
  }
  return true;
}

}  // namespace

std::vector<double> gptq_factor(const std::vector<double>& h, int64_t ks) {
  double mean_diag = 0;
  for (int64_t i = 0; i < ks; ++i) mean_diag += h[static_cast<size_t>(i * ks + i)];
  mean_diag /= static_cast<double>(ks);
  if (!(mean_diag > 0)) return {};
  for (double damp = 0.01; damp < 10; damp *= 10) {
    std::vector<double> l = h;
    for (int64_t i = 0; i < ks; ++i) l[static_cast<size_t>(i * ks + i)] += damp * mean_diag;
    if (!cholesky(l, ks)) continue;
    // H^-1 = L^-T L^-1, from the inverse of the lower factor.
    std::vector<double> li(static_cast<size_t>(ks * ks), 0.0);
    for (int64_t j = 0; j < ks; ++j) {
      li[static_cast<size_t>(j * ks + j)] = 1.0 / l[static_cast<size_t>(j * ks + j)];
      for (int64_t i = j + 1; i < ks; ++i) {
        double s = 0;
        for (int64_t p = j; p < i; ++p) s += l[static_cast<size_t>(i * ks + p)] * li[static_cast<size_t>(p * ks + j)];
        li[static_cast<size_t>(i * ks + j)] = -s / l[static_cast<size_t>(i * ks + i)];
      }
    }
    std::vector<double> inv(static_cast<size_t>(ks * ks), 0.0);
    for (int64_t i = 0; i < ks; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0;
        for (int64_t p = i; p < ks; ++p) s += li[static_cast<size_t>(p * ks + i)] * li[static_cast<size_t>(p * ks + j)];
        inv[static_cast<size_t>(i * ks + j)] = inv[static_cast<size_t>(j * ks + i)] = s;
      }
    }
    if (!cholesky(inv, ks)) continue;
    // U = L2^T: u[j][i] = L2[i][j] for i >= j.
    std::vector<double> u(static_cast<size_t>(ks * ks), 0.0);
    for (int64_t i = 0; i < ks; ++i) {
      for (int64_t j = 0; j <= i; ++j) u[static_cast<size_t>(j * ks + i)] = inv[static_cast<size_t>(i * ks + j)];
    }
    return u;
  }
  return {};
}

}  // namespace ork
