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
#include <vector>

#include "ork/status.h"

namespace ork {

class GgufFile;
class Model;

struct ImportanceVectors {
  std::vector<float> raw;      // K values
  std::vector<float> rotated;  // k_stored values, in the rotated basis
  std::vector<float> cov;      // K x K second moments E[x x^T] (raw basis), for
                               // error-correcting rounding; empty when K > kMaxCovarianceK
};

// Inputs wider than this keep the diagonal only (a K x K matrix per input
// would not fit in memory for large models).
inline constexpr int64_t kMaxCovarianceK = 1024;

class ImportanceMatrix {
 public:
  // Runs the reference forward pass over `tokens` in windows of `n_ctx`
  // (each window starting with BOS if the model uses one) and accumulates.
  static Result<ImportanceMatrix> collect(const Model& model, const std::vector<int32_t>& tokens, int n_ctx,
                                          uint64_t rotation_seed, int bos, const std::function<void(int, int)>& progress);
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
  std::map<std::string, ImportanceVectors> entries_;
  uint64_t tokens_ = 0;
  uint64_t rotation_seed_ = 0;
};

}  // namespace ork
