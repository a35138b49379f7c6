// Summing calibration inputs into an importance matrix (imatrix.h). Apart
// from the file's reader: this is arithmetic the packing tests run hot, the
// reader is what a fuzz target steers (CMakeLists.txt's ORK_FUZZ_COVERED).
#include "quant/imatrix.h"

#include <algorithm>

#include "quant/rotation.h"
#include "quant/tier.h"

namespace ork {

void ImportanceAccumulator::add(const std::string& name, const float* x, int n, int64_t k) {
  Sums& a = sums_[name];
  const int64_t ks = tier_stored_k(k);
  const int block = rotation_block(ks);
  a.raw.resize(static_cast<size_t>(k));
  a.rotated.resize(static_cast<size_t>(ks));
  row_.resize(static_cast<size_t>(ks));
  const bool with_cov = k <= kMaxCovarianceK;
  if (with_cov) a.cov.resize(static_cast<size_t>(k * k));
  for (int t = 0; t < n; ++t) {
    const float* xt = x + static_cast<int64_t>(t) * k;
    if (with_cov) {
      for (int64_t i = 0; i < k; ++i) {
        const double xi = xt[i];
        double* c = &a.cov[static_cast<size_t>(i * k)];
        for (int64_t j = 0; j < k; ++j) c[j] += xi * xt[j];
      }
    }
    std::fill(row_.begin(), row_.end(), 0.0f);
    std::copy_n(xt, k, row_.begin());
    for (int64_t j = 0; j < k; ++j) a.raw[static_cast<size_t>(j)] += static_cast<double>(xt[j]) * xt[j];
    rotate(row_.data(), ks, block, rotation_seed_);
    for (int64_t j = 0; j < ks; ++j) {
      a.rotated[static_cast<size_t>(j)] += static_cast<double>(row_[static_cast<size_t>(j)]) * row_[static_cast<size_t>(j)];
    }
  }
  a.count += static_cast<uint64_t>(n);
}

ImportanceMatrix ImportanceAccumulator::finish(uint64_t tokens) const {
  ImportanceMatrix m;
  m.tokens_ = tokens;
  m.rotation_seed_ = rotation_seed_;
  for (const auto& [name, a] : sums_) {
    ImportanceVectors& v = m.entries_[name];
    v.count = a.count;
    const double inv = a.count > 0 ? 1.0 / static_cast<double>(a.count) : 0.0;
    for (double s : a.raw) v.raw.push_back(static_cast<float>(s * inv));
    for (double s : a.rotated) v.rotated.push_back(static_cast<float>(s * inv));
    for (double s : a.cov) v.cov.push_back(static_cast<float>(s * inv));
  }
  return m;
}

}  // namespace ork
