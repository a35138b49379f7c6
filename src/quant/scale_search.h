// Per-row scale search shared by every quantized tier: the scale that
// minimises the importance-weighted squared error of a row, for a grid of
// representable levels (integers in a range, or the NF4 codebook).
#pragma once

#include <algorithm>
#include <bit>
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
    if (levels_.size() > kMaxLevels) {
      int index = 0;
      for (size_t i = 0; i + 1 < levels_.size(); ++i) index += nearer_upper(levels_[i], levels_[i + 1], x) ? 1 : 0;
      return index;
    }
    int index = 0;
    for (size_t i = 0; i + 1 < levels_.size(); ++i) index += x > bounds_[i] ? 1 : 0;
    return index;
  }
  // The nearest of two neighbouring levels a < b is b exactly when this
  // holds (ties toward a), computed as written: the nearest of all the
  // levels is the number of neighbour pairs for which it holds, since below
  // a pair it fails, above it it holds, and only the pair around x can go
  // either way.
  static bool nearer_upper(float a, float b, float x) { return (x - a) > (b - x); }
  // The codebooks Grid keeps bounds for (nf4's 16 levels).
  static constexpr size_t kMaxLevels = 16;
  // bounds()[i]: the largest float for which nearer_upper(level i, level
  // i + 1) fails, so that it holds exactly for x > bounds()[i]. Both of its
  // roundings move monotonically with x, so it flips once; one comparison
  // per pair then finds the nearest level, which the scale search asks for
  // every weight at ~30 scales.
  const float* bounds() const { return bounds_; }
  float level(int index) const {
    return levels_.empty() ? static_cast<float>(lo_ + index) : levels_[static_cast<size_t>(index)];
  }
  // The integers lo..hi rather than a codebook.
  bool is_integers() const { return levels_.empty(); }
  std::span<const float> levels() const { return levels_; }
  int lo() const { return lo_; }
  int hi() const { return hi_; }
  float max_abs() const {
    return levels_.empty() ? static_cast<float>(std::max(-lo_, hi_))
                           : std::max(-levels_.front(), levels_.back());
  }

 private:
  Grid(int lo, int hi) : lo_(lo), hi_(hi) {}
  explicit Grid(std::span<const float> levels) : levels_(levels) {
    for (size_t i = 0; i + 1 < levels.size() && i + 1 < kMaxLevels; ++i) bounds_[i] = last_lower(levels[i], levels[i + 1]);
  }
  // Floats as unsigned keys in their numeric order, and back.
  static uint32_t key_of(float x) {
    const auto u = std::bit_cast<uint32_t>(x);
    return (u & 0x80000000u) != 0 ? ~u : u | 0x80000000u;
  }
  static float float_of(uint32_t key) {
    return std::bit_cast<float>((key & 0x80000000u) != 0 ? key & 0x7FFFFFFFu : ~key);
  }
  // The largest float in [a, b) where nearer_upper(a, b) fails (it fails at
  // a and holds at b), by bisection over the floats between them.
  static float last_lower(float a, float b) {
    uint32_t lo = key_of(a), hi = key_of(b);
    while (hi - lo > 1) {
      const uint32_t mid = lo + (hi - lo) / 2;
      (nearer_upper(a, b, float_of(mid)) ? hi : lo) = mid;
    }
    return float_of(lo);
  }
  int lo_ = 0, hi_ = 0;
  std::span<const float> levels_;
  float bounds_[kMaxLevels - 1] = {};
};

struct ScaleChoice {
  float scale = 0.0f;
  double error = 0.0;  // sum_j importance_j (w_j - scale * level_j)^2
};

// Searches scale = max|w| / max_abs * f over f in [0.5, 1.2], then refines
// by least squares for the codes of the best candidate. importance may be
// null. Scales below `min_scale` are not considered. Every candidate is an
// f16 value where f16 holds it as a normal number, so that an orkpack can
// keep the scales in f16 (orkpack_scale_bytes).
ScaleChoice search_scale(const float* w, const float* importance, int64_t n, const Grid& grid, float min_scale = 0.0f);

}  // namespace ork
