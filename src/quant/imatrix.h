// Importance matrices: for every matmul input, the mean square of each input
// column over calibration tokens — both as the activations arrive and after
// the rotation ork pack applies to that weight (a diagonal cannot be rotated
// after the fact). Stored as a tensorless-looking GGUF: one F32 tensor per
// weight and basis, "<weight>.in_sq" [K] and "<weight>.in_sq_rot" [K padded],
// and "<weight>.in_cov" [K, K] where K is small enough.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ork/status.h"

namespace ork {

class GgufFile;
class ThreadPool;

struct ImportanceVectors {
  std::vector<float> raw;      // K values
  std::vector<float> rotated;  // k_stored values, in the rotated basis
  // The K x K second moments E[x x^T] (raw basis), for error-correcting
  // rounding: symmetric, so the lower triangle alone, row after row (row
  // i's i + 1 values from lower_at(i, 0) on; half the memory of the whole -
  // about 5 GB for the full qwen3.6's expert downs); empty when K >
  // kMaxCovarianceK. The file holds the whole matrix.
  std::vector<float> cov_lower;
  // Where (i, j) of a symmetric matrix is in its lower triangle.
  static size_t lower_at(int64_t i, int64_t j) {
    if (j > i) std::swap(i, j);
    return static_cast<size_t>(i * (i + 1) / 2 + j);
  }
  static size_t lower_size(int64_t k) { return static_cast<size_t>(k * (k + 1) / 2); }
  uint64_t count = 0;          // rows that reached this input (an expert's: the tokens routed
                               // to it); 0 in files written before it was recorded: unknown
};

// Inputs wider than this keep the diagonal only (a K x K matrix per input
// would not fit in memory for large models).
inline constexpr int64_t kMaxCovarianceK = 1024;

class ImportanceMatrix {
 public:
  static Result<ImportanceMatrix> load(const std::string& path);
  // The same from a GGUF already parsed (errors name gguf.path()).
  static Result<ImportanceMatrix> parse(const GgufFile& gguf);
  Status save(const std::string& path, const std::string& source) const;

  // Null when the weight was never a matmul input in the calibration run.
  const ImportanceVectors* find(const std::string& weight) const;
  uint64_t tokens() const { return tokens_; }
  uint64_t rotation_seed() const { return rotation_seed_; }
  const std::map<std::string, ImportanceVectors>& entries() const { return entries_; }

 private:
  friend class ImportanceAccumulator;
  std::map<std::string, ImportanceVectors> entries_;
  uint64_t tokens_ = 0;
  uint64_t rotation_seed_ = 0;
};

// Sums the inputs of every matmul of a calibration run (collect_importance
// in model/imatrix_collect.h feeds it from the forward pass's observer):
// per input column the mean square, raw and in the rotated basis, and the
// second moments where K is small enough.
//
// With a pool, add() runs on its threads - the rows rotated in parallel,
// then the sums split by column (the covariance by row) - and every sum
// still adds its terms in row order, so the matrix is the same bit for bit
// on any number of threads. Not thread-safe itself: one add() at a time,
// from outside the pool's loops.
class ImportanceAccumulator {
 public:
  explicit ImportanceAccumulator(uint64_t rotation_seed, ThreadPool* pool = nullptr)
      : rotation_seed_(rotation_seed), pool_(pool) {}
  // n rows of k floats, the input of the weight called `name`.
  void add(const std::string& name, const float* x, int n, int64_t k);
  // The matrix, the accumulator spent (its sums freed as they convert).
  ImportanceMatrix finish(uint64_t tokens) &&;

 private:
  struct Sums {
    // cov: the lower triangle alone, laid out as ImportanceVectors::cov_lower.
    std::vector<double> raw, rotated, cov;
    uint64_t count = 0;
  };
  // fn over [0, n) on the pool's threads (shared claims of at least
  // `grain`), or in one call without a pool.
  void parallel(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const;
  uint64_t rotation_seed_;
  ThreadPool* pool_;
  std::map<std::string, Sums> sums_;
  std::vector<float> rotated_rows_;
};

}  // namespace ork
