// model/expert_pages.h: which regions a model's routed experts take, and
// their upkeep on the pool's idle workers.
#include "model/expert_pages.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "model/forward.h"
#include "model/model.h"
#include "quant/packer.h"
#include "testdata.h"

namespace ork {
namespace {

Result<std::unique_ptr<Model>> packed(const std::string& gguf, const std::string& name,
                                      MappedFile::Residency residency = MappedFile::Residency::kResident) {
  PackOptions o;
  o.input = testing::testdata(gguf);
  o.output = ::testing::TempDir() + "/expert_pages_" + name + ".orkpack";
  o.rules = {*parse_tier_rule(".=i4")};
  if (auto report = pack_model(o); !report.is_ok()) return report.status();
  return Model::load(o.output, residency);
}

// Every routed expert's codes and scales lie in the regions listed, one
// address a 2 MiB region, each one of the experts' own bytes.
TEST(ExpertPages, ARegionForEvery2MiBOfTheRoutedExperts) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto model = packed("models/sotu-moe-f32.gguf", "moe");
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  ExpertPages pages(**model);
  ASSERT_GT(pages.regions(), 0u);
  // Fewer regions than expert matrices' halves: small experts share them.
  size_t matrices = 0;
  for (int l = 0; l < (*model)->config().n_layer; ++l) {
    matrices += 3 * (*model)->layer(l).gate_exps.size();
  }
  EXPECT_LE(pages.regions(), 2 * matrices);
  for (size_t i = 0; i < 2 * pages.regions(); ++i) pages.touch_next();  // every one readable, twice round
}

TEST(ExpertPages, NoneForADenseModelOrAMappedOne) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  ORK_REQUIRE_TESTDATA("models/tinystories656K-f32.gguf");
  auto dense = packed("models/tinystories656K-f32.gguf", "dense");
  ASSERT_TRUE(dense.is_ok());
  EXPECT_EQ(ExpertPages(**dense).regions(), 0u);
  auto mapped = packed("models/sotu-moe-f32.gguf", "mapped", MappedFile::Residency::kMapped);
  ASSERT_TRUE(mapped.is_ok());
  EXPECT_EQ(ExpertPages(**mapped).regions(), 0u);
}

// keep() hands touch_next to the pool and the destructor takes it back;
// ORK_KEEP_EXPERT_PAGES=0 keeps it from being handed over.
TEST(ExpertPages, KeptByThePoolUntilDestroyedUnlessTurnedOff) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto model = packed("models/sotu-moe-f32.gguf", "keep");
  ASSERT_TRUE(model.is_ok());
  ThreadPool pool(2);
  {
    ExpertPages pages(**model);
    pages.keep(pool);
    const ThreadPool::Idle now = pool.set_idle_task({});
    EXPECT_EQ(now.arg, &pages);
    (void)pool.set_idle_task(now);
  }
  EXPECT_EQ(pool.set_idle_task({}).task, nullptr);  // taken back
  setenv("ORK_KEEP_EXPERT_PAGES", "0", 1);
  {
    ExpertPages pages(**model);
    pages.keep(pool);
    EXPECT_EQ(pool.set_idle_task({}).task, nullptr);
  }
  unsetenv("ORK_KEEP_EXPERT_PAGES");
}

// A Context decoding on the global pool starts the upkeep; decoding with
// it gives the same logits as without (it only reads).
TEST(ExpertPages, AContextStartsTheUpkeepAndDecodesAlike) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  auto model = packed("models/sotu-moe-f32.gguf", "context");
  ASSERT_TRUE(model.is_ok());
  ThreadPool own(2);
  std::vector<float> without, with;
  const std::vector<int32_t> prompt = {1, 5, 9, 13};
  {
    Context ctx(**model, 32, &own);  // a pool of its own: no upkeep
    ASSERT_TRUE(ctx.eval(prompt, without).is_ok());
  }
  Context ctx(**model, 32);
  const ThreadPool::Idle now = ThreadPool::global().set_idle_task({});
  EXPECT_NE(now.task, nullptr);
  (void)ThreadPool::global().set_idle_task(now);
  ASSERT_TRUE(ctx.eval(prompt, with).is_ok());
  EXPECT_EQ(with, without);
}

}  // namespace
}  // namespace ork
