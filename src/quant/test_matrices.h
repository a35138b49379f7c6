// Deterministic test matrices for quantizer measurements: Gaussian,
// heavy-tailed (Student-t, nu = 4) and Gaussian with a few outlier columns
// (x10, as real activations-facing weights have). Shared by the tier tests
// and the error table in bench/tier_error.cc.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ork {

enum class MatrixKind { kGaussian, kStudentT4, kOutlierColumns };

inline const char* matrix_kind_name(MatrixKind kind) {
  switch (kind) {
    case MatrixKind::kGaussian: return "gaussian";
    case MatrixKind::kStudentT4: return "student-t4";
    case MatrixKind::kOutlierColumns: return "outlier-cols";
  }
  return "?";
}

inline std::vector<float> make_test_matrix(MatrixKind kind, int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::chi_squared_distribution<float> chi2(4.0f);
  std::vector<float> m(static_cast<size_t>(rows * cols));
  for (auto& v : m) {
    v = normal(rng);
    if (kind == MatrixKind::kStudentT4) v /= std::sqrt(chi2(rng) / 4.0f);
  }
  if (kind == MatrixKind::kOutlierColumns) {
    for (int64_t c = 3; c < cols; c += 97) {  // about 1 % of the columns
      for (int64_t r = 0; r < rows; ++r) m[static_cast<size_t>(r * cols + c)] *= 10.0f;
    }
  }
  return m;
}

// sqrt(sum (a - b)^2 / sum a^2): the relative RMS error of b against a.
inline double relative_rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    den += a[i] * static_cast<double>(a[i]);
  }
  return std::sqrt(num / den);
}

}  // namespace ork
