// Summing calibration inputs into an importance matrix (imatrix.h). Apart
// from the file's reader: this is arithmetic the packing tests run hot, the
// reader is what a fuzz target steers (CMakeLists.txt's ORK_FUZZ_COVERED).
#include "quant/imatrix.h"

#include <algorithm>

#include "core/thread_pool.h"
#include "quant/rotation.h"
#include "quant/tier.h"

namespace ork {

void ImportanceAccumulator::parallel(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const {
  if (pool_ == nullptr || pool_->size() == 1) return fn(0, n);
  pool_->run(n, fn, grain, ThreadPool::Schedule::kShared);
}

void ImportanceAccumulator::add(const std::string& name, const float* x, int n, int64_t k) {
  Sums& a = sums_[name];
  const int64_t ks = tier_stored_k(k);
  const int block = rotation_block(ks);
  a.raw.resize(static_cast<size_t>(k));
  a.rotated.resize(static_cast<size_t>(ks));
  const bool with_cov = k <= kMaxCovarianceK;
  if (with_cov) a.cov.resize(ImportanceVectors::lower_size(k));
  // Each row zero-padded to ks and rotated, on its own.
  rotated_rows_.assign(static_cast<size_t>(n) * static_cast<size_t>(ks), 0.0f);
  float* const rot = rotated_rows_.data();
  parallel(n, 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      std::copy_n(x + t * k, k, rot + t * ks);
      rotate(rot + t * ks, ks, block, rotation_seed_);
    }
  });
  // Every column's sums over the rows in order (a float times a float is
  // exact in double, so only the order of the additions could differ).
  parallel(ks, 256, [&](int64_t j0, int64_t j1) {
    for (int t = 0; t < n; ++t) {
      const float* xt = x + static_cast<int64_t>(t) * k;
      const float* rt = rot + static_cast<int64_t>(t) * ks;
      for (int64_t j = j0; j < std::min(j1, k); ++j) a.raw[static_cast<size_t>(j)] += static_cast<double>(xt[j]) * xt[j];
      for (int64_t j = j0; j < j1; ++j) a.rotated[static_cast<size_t>(j)] += static_cast<double>(rt[j]) * rt[j];
    }
  });
  if (with_cov) {
    // The lower triangle, a row of it at a time over every input row.
    parallel(k, 8, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        double* c = &a.cov[ImportanceVectors::lower_at(i, 0)];
        for (int t = 0; t < n; ++t) {
          const float* xt = x + static_cast<int64_t>(t) * k;
          const double xi = xt[i];
          for (int64_t j = 0; j <= i; ++j) c[j] += xi * xt[j];
        }
      }
    });
  }
  a.count += static_cast<uint64_t>(n);
}

ImportanceMatrix ImportanceAccumulator::finish(uint64_t tokens) && {
  ImportanceMatrix m;
  m.tokens_ = tokens;
  m.rotation_seed_ = rotation_seed_;
  // Each input's sums are freed once its floats are made: the doubles and
  // the floats of the whole model are never alive at once (the full
  // qwen3.6's expert downs alone hold about 10 GB of each).
  while (!sums_.empty()) {
    auto node = sums_.extract(sums_.begin());
    const Sums& a = node.mapped();
    ImportanceVectors& v = m.entries_[node.key()];
    v.count = a.count;
    const double inv = a.count > 0 ? 1.0 / static_cast<double>(a.count) : 0.0;
    v.raw.reserve(a.raw.size());
    v.rotated.reserve(a.rotated.size());
    for (double s : a.raw) v.raw.push_back(static_cast<float>(s * inv));
    for (double s : a.rotated) v.rotated.push_back(static_cast<float>(s * inv));
    // The sums' lower triangle is the matrix's, in the same order.
    v.cov_lower.reserve(a.cov.size());
    for (double s : a.cov) v.cov_lower.push_back(static_cast<float>(s * inv));
  }
  rotated_rows_ = {};
  return m;
}

}  // namespace ork
