// Per-row scale search shared by every quantized tier: the scale that
// minimises the importance-weighted squared error of a row, for a grid of
// representable levels (integers in a range, or the NF4 codebook).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

namespace ork {

// Levels in units of the scale, sorted ascending.
class Grid {
 public:
  // The integers lo..hi.
  static Grid integers(int lo, int hi) { return Grid(lo, hi); }
  // An explicit sorted codebook.
  static Grid codebook(std::span<const float> levels) { return Grid(levels); }

  // Index of the level nearest x (ties toward the lower index).
  int index(float x) const {
    if (levels_.empty()) {
      // Clamping to integer bounds first rounds the same; adding and
      // subtracting 1.5 * 2^23 rounds half to even like nearbyint in the
      // default mode, but inline (nearbyint is a libm call without SSE4.1,
      // and it was 90 % of a pack's time).
      constexpr float kMagic = 12582912.0f;
      const float c = std::clamp(x, static_cast<float>(lo_), static_cast<float>(hi_));
      return static_cast<int>((c + kMagic) - kMagic) - lo_;
    }
    const auto it = std::lower_bound(levels_.begin(), levels_.end(), x);
    if (it == levels_.begin()) return 0;
    if (it == levels_.end()) return static_cast<int>(levels_.size()) - 1;
    const int i = static_cast<int>(it - levels_.begin());
    return (x - levels_[static_cast<size_t>(i - 1)] <= levels_[static_cast<size_t>(i)] - x) ? i - 1 : i;
  }
  float level(int index) const {
    return levels_.empty() ? static_cast<float>(lo_ + index) : levels_[static_cast<size_t>(index)];
  }
  // The integers lo..hi rather than a codebook.
  bool is_integers() const { return levels_.empty(); }
  int lo() const { return lo_; }
  int hi() const { return hi_; }
  float max_abs() const {
    return levels_.empty() ? static_cast<float>(std::max(-lo_, hi_))
                           : std::max(-levels_.front(), levels_.back());
  }

 private:
  Grid(int lo, int hi) : lo_(lo), hi_(hi) {}
  explicit Grid(std::span<const float> levels) : levels_(levels) {}
  int lo_ = 0, hi_ = 0;
  std::span<const float> levels_;
};

struct ScaleChoice {
  float scale = 0.0f;
  double error = 0.0;  // sum_j importance_j (w_j - scale * level_j)^2
};

// Searches scale = max|w| / max_abs * f over f in [0.5, 1.2], then refines
// by least squares for the codes of the best candidate. importance may be
// null. Scales below `min_scale` are not considered.
ScaleChoice search_scale(const float* w, const float* importance, int64_t n, const Grid& grid, float min_scale = 0.0f);

}  // namespace ork
