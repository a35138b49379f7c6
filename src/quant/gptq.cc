#include "quant/gptq.h"

#include <algorithm>
#include <cmath>

namespace ork {
namespace {

// Dot product of a[0, n) and b[0, n), summed in order (a pack is the same
// file on every machine).
inline double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t p = 0; p < n; ++p) s += a[p] * b[p];
  return s;
}

// In-place lower Cholesky factor L (A = L L^T) of a k x k symmetric matrix
// (only its lower triangle is read; the upper is zeroed); false if it is
// not positive definite. Left-looking, by panels of kPanel columns: each
// row's part left of the panel meets the panel's kPanel rows (kept in
// cache) in one pass, so the matrix streams from memory once per panel
// instead of once per column - a k = 4096 factor reads 128 MiB of doubles
// per pass - and the rest of each column is short dot products inside the
// panel. Every inner loop is a contiguous dot product.
bool cholesky(std::vector<double>& m, int64_t k) {
  constexpr int64_t kPanel = 16;
  auto row = [&](int64_t i) { return m.data() + i * k; };
  for (int64_t jb = 0; jb < k; jb += kPanel) {
    const int64_t je = std::min(k, jb + kPanel);
    // Columns [0, jb) of every row at or below the panel against the panel's rows.
    if (jb > 0) {
      for (int64_t i = jb; i < k; ++i) {
        double* ai = row(i);
        for (int64_t j = jb; j < std::min(je, i + 1); ++j) ai[j] -= dot(ai, row(j), jb);
      }
    }
    // The panel's own columns, one after another.
    for (int64_t j = jb; j < je; ++j) {
      double* aj = row(j);
      const double d2 = aj[j] - dot(aj + jb, aj + jb, j - jb);
      if (!(d2 > 0)) return false;
      const double d = std::sqrt(d2);
      aj[j] = d;
      for (int64_t i = j + 1; i < k; ++i) {
        double* ai = row(i);
        ai[j] = (ai[j] - dot(ai + jb, aj + jb, j - jb)) / d;
      }
    }
  }
  for (int64_t i = 0; i < k; ++i) std::fill(row(i) + i + 1, row(i) + k, 0.0);
  return true;
}

}  // namespace

// With J the reversal of the indices, the lower Cholesky factor M of J H J
// gives H = R R^T for the upper R = J M J.
std::vector<double> gptq_factor(const std::vector<double>& h, int64_t ks) {
  double mean_diag = 0;
  for (int64_t i = 0; i < ks; ++i) mean_diag += h[static_cast<size_t>(i * ks + i)];
  mean_diag /= static_cast<double>(ks);
  if (!(mean_diag > 0)) return {};
  const auto at = [ks](int64_t i, int64_t j) { return static_cast<size_t>(i * ks + j); };
  for (double damp = 0.01; damp < 10; damp *= 10) {
    std::vector<double> m(static_cast<size_t>(ks * ks));
    for (int64_t i = 0; i < ks; ++i) {
      for (int64_t j = 0; j <= i; ++j) m[at(i, j)] = h[at(ks - 1 - i, ks - 1 - j)];
      m[at(i, i)] += damp * mean_diag;
    }
    if (!cholesky(m, ks)) continue;
    std::vector<double> r(static_cast<size_t>(ks * ks), 0.0);
    for (int64_t i = 0; i < ks; ++i) {
      for (int64_t j = i; j < ks; ++j) r[at(i, j)] = m[at(ks - 1 - i, ks - 1 - j)];
    }
    return r;
  }
  return {};
}

}  // namespace ork
