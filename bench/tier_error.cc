// Prints docs/QUALITY.md's tier table: relative RMS error of every tier's
// quantize -> dequantize round trip on 256 x 1024 matrices (Gaussian,
// Student-t nu=4, Gaussian with 1 % outlier columns), with and without the
// Hadamard rotation. Usage: ork-tier-error > table.md
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "quant/rotation.h"
#include "quant/test_matrices.h"
#include "quant/tier.h"

namespace {


// Round trip of `w`, optionally rotated before quantizing and unrotated
// after, so the error is measured in the original space. high_only reads
// an i8s tensor's high plane alone.
double round_trip(ork::Tier tier, const std::vector<float>& w, int64_t rows, int64_t k, bool rotated, bool high_only) {
  std::vector<float> x = w;
  const int block = ork::rotation_block(k);
  if (rotated) {
    for (int64_t r = 0; r < rows; ++r) ork::rotate(&x[static_cast<size_t>(r * k)], k, block, 1);
  }
  std::vector<uint8_t> data(ork::tier_data_bytes(tier, rows, k));
  std::vector<float> scales(static_cast<size_t>(rows));
  ork::quantize_tier(tier, x.data(), nullptr, rows, k, data.data(), scales.data());
  const ork::TierTensor t{tier, data.data(), scales.data(), rows, k};
  std::vector<float> y(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    float* out = &y[static_cast<size_t>(r * k)];
    if (high_only) ork::dequantize_i8s_high_row(t, r, out);
    else ork::dequantize_tier_row(t, r, out);
    if (rotated) ork::unrotate(out, k, block, 1);
  }
  return ork::relative_rmse(w, y);
}

}  // namespace

int main() {
  using ork::MatrixKind;
  using ork::Tier;
  const int64_t rows = 256, k = 1024;
  const MatrixKind kinds[] = {MatrixKind::kGaussian, MatrixKind::kStudentT4, MatrixKind::kOutlierColumns};
  std::vector<std::vector<float>> mats;
  for (MatrixKind kind : kinds) mats.push_back(ork::make_test_matrix(kind, rows, k, 2024));

  std::printf("| tier | bits/weight | gaussian | gaussian, rotated | student-t4 | student-t4, rotated | outlier-cols | outlier-cols, rotated |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  struct Row {
    Tier tier;
    const char* label;
    bool high_only;
  };
  const Row rows_to_print[] = {{Tier::kF16, "f16", false},  {Tier::kI8, "i8", false},
                               {Tier::kI8s, "i8s (both planes)", false},
                               {Tier::kI6, "i6", false},    {Tier::kI5, "i5", false},
                               {Tier::kNf4, "nf4", false},  {Tier::kI4, "i4", false},
                               {Tier::kI8s, "i8s (high plane only)", true}};
  for (const Row& r : rows_to_print) {
    // Bits per weight including the row scale (f16, as an orkpack keeps it).
    const double bits = (r.high_only ? 4.0 : ork::tier_info(r.tier).bits) + (ork::tier_info(r.tier).has_scales ? 16.0 / k : 0.0);
    std::printf("| %s | %.3f |", r.label, bits);
    for (const auto& w : mats) {
      for (bool rotated : {false, true}) std::printf(" %.4f |", round_trip(r.tier, w, rows, k, rotated, r.high_only));
    }
    std::printf("\n");
  }

  // K that is not a power of two: block-diagonal rotation (the largest
  // power-of-two block dividing K) against padding K up to a power of two
  // and rotating it whole. Padding costs bytes; the question is whether the
  // wider rotation buys enough accuracy to pay for them.
  std::printf("\n| outlier-cols, K = 1536, i4 | stored K | bytes vs block-diagonal | rel. RMS error |\n|---|---|---|---|\n");
  const int64_t k2 = 1536, rows2 = 128;
  const auto w2 = ork::make_test_matrix(MatrixKind::kOutlierColumns, rows2, k2, 77);
  std::printf("| block-diagonal, 3 blocks of 512 | 1536 | 1.00 | %.4f |\n", round_trip(Tier::kI4, w2, rows2, k2, true, false));
  std::vector<float> padded(static_cast<size_t>(rows2 * 2048), 0.0f);
  for (int64_t r = 0; r < rows2; ++r) {
    std::copy_n(&w2[static_cast<size_t>(r * k2)], k2, &padded[static_cast<size_t>(r * 2048)]);
  }
  std::printf("| padded to 2048, one block | 2048 | 1.33 | %.4f |\n", round_trip(Tier::kI4, padded, rows2, 2048, true, false));
  std::printf("| not rotated | 1536 | 1.00 | %.4f |\n", round_trip(Tier::kI4, w2, rows2, k2, false, false));
  return 0;
}
