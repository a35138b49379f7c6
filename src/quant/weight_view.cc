#include "quant/weight_view.h"

#include <algorithm>
#include <vector>

#include "format/gguf/dequant.h"
#include "quant/rotation.h"

namespace ork {

void dequantize_row(const WeightView& w, int64_t r, float* out) {
  if (!w.is_tier) {
    // Callers validated the type when the model was loaded.
    (void)dequantize(w.type, w.data + static_cast<uint64_t>(r) * w.row_bytes, out, w.cols);
    return;
  }
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(w.k_stored));
  dequantize_tier_row(w.tier_tensor(), r, row.data());
  if (w.rotation_block > 0) unrotate(row.data(), w.k_stored, w.rotation_block, w.rotation_seed);
  std::copy_n(row.begin(), w.cols, out);
}

uint64_t matrix_bytes(const WeightView& w) {
  // From the geometry alone: a routed expert kept on disk (no data until
  // the expert cache lends it) has its bytes all the same.
  if (w.rows <= 0) return 0;
  if (!w.is_tier) return w.row_bytes * static_cast<uint64_t>(w.rows);
  return tier_data_bytes(w.tier, w.rows, w.k_stored) +
         (tier_info(w.tier).has_scales ? 4ull * static_cast<uint64_t>(w.rows) : 0);
}

}  // namespace ork
