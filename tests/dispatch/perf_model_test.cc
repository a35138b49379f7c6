// The calibrated performance model's shape, on this machine: calibration
// succeeds, and its predictions are finite, positive and ordered as the
// bytes read are (a larger matrix costs more; int4 less than int8 at M = 1;
// a batch more than one token). How close the predictions are to measured
// times is a measurement, not a test: bench/perf_model_check.cc.
#include <gtest/gtest.h>

#include <cmath>

#include "core/thread_pool.h"
#include "dispatch/perf_model.h"

namespace ork {
namespace {

TEST(PerfModel, CalibratedPredictionsFollowTheBytesRead) {
  auto model = PerfModel::calibrate(ThreadPool::global());
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  for (Tier tier : {Tier::kI4, Tier::kNf4, Tier::kI8, Tier::kI8s}) {
    const MatmulOp small{tier, 1, 2048, 2048}, big{tier, 1, 8192, 8192}, batch{tier, 64, 8192, 8192};
    const double s = model->cpu_us(small), b = model->cpu_us(big), m = model->cpu_us(batch);
    EXPECT_TRUE(std::isfinite(s) && s > 0) << tier_name(tier) << ": " << s;
    EXPECT_GT(b, s) << tier_name(tier);
    EXPECT_GT(m, b) << tier_name(tier);
  }
  const MatmulOp i4{Tier::kI4, 1, 8192, 8192}, i8{Tier::kI8, 1, 8192, 8192}, i8s{Tier::kI8s, 1, 8192, 8192};
  EXPECT_LT(model->cpu_us(i4), model->cpu_us(i8));
  // An i8s weight read by its high plane alone costs about what int4 does.
  EXPECT_LT(model->cpu_us(i8s, /*i8s_high_only=*/true), model->cpu_us(i8s));
}

}  // namespace
}  // namespace ork
