// engines/cpu/read_replay.h: what decode's loops record of one token's
// reads, and the plain read of it again.
#include <gtest/gtest.h>

#include <vector>

#include "core/thread_pool.h"
#include "engines/cpu/read_replay.h"
#include "model/forward.h"
#include "quant/packer.h"
#include "testdata.h"

namespace ork {
namespace {

TEST(ReadRecord, CountsRowsByLoopAndSkipsEmptyLoops) {
  std::vector<uint8_t> a(64 * 256);
  std::vector<uint16_t> f(100 * 96);
  std::vector<float> scales(64);
  QuantWeights w;
  w.kind = CodeKind::kI4;
  w.p0 = a.data();
  w.scales = scales.data();
  w.rows = 64;
  w.k = 512;
  ReadRecord r;
  r.begin_loop();
  r.add_float_rows(cpu::FloatWeights::kF16, f.data(), 96, 0, 100);  // 100 rows of 192 bytes
  r.begin_loop();
  r.begin_loop();  // the loop before it read nothing: not a loop
  r.add_rows(w, 8, 40);  // 32 rows of 256 code bytes and a scale each
  r.add_rows(w, 40, 40);  // no rows
  r.add_float_rows(cpu::FloatWeights::kF32, nullptr, 96, 0, 10);  // nothing to read
  EXPECT_EQ(r.loops(), 2u);
  EXPECT_EQ(r.bytes(), 100u * 192u + 32u * 256u + 32u * 4u);
  EXPECT_GT(r.replay(ThreadPool::global()), 0.0);
  EXPECT_GT(r.replay(ThreadPool::global(), ReadRecord::Replay::kKernels), 0.0);
  r.clear();
  EXPECT_EQ(r.loops(), 0u);
  EXPECT_EQ(r.bytes(), 0u);
  EXPECT_GE(r.replay(ThreadPool::global()), 0.0);
}

// One decoded token with the record set: every weight byte its matmuls
// read, the dense ones and the routed experts of that token, and nothing
// once the record is unset.
void check_one_token(const std::string& gguf, const std::string& name) {
  PackOptions o;
  o.input = testing::testdata(gguf);
  o.output = ::testing::TempDir() + "/read_record_" + name + ".orkpack";
  o.rules = {*parse_tier_rule(".=i4")};
  ASSERT_TRUE(pack_model(o).is_ok()) << name;
  auto model = Model::load(o.output);
  ASSERT_TRUE(model.is_ok()) << name;
  Context ctx(**model, 64);
  std::vector<float> logits;
  const std::vector<int32_t> prompt = {1, 5, 9, 13};
  ASSERT_TRUE(ctx.eval(prompt, logits).is_ok());
  ReadRecord record;
  const uint64_t experts_before = ctx.moe_stats().expert_bytes;
  ctx.set_read_record(&record);
  const int32_t t = 7;
  ASSERT_TRUE(ctx.eval(std::span<const int32_t>(&t, 1), logits).is_ok());
  ctx.set_read_record(nullptr);
  const uint64_t experts = ctx.moe_stats().expert_bytes - experts_before;
  EXPECT_EQ(record.bytes(), (*model)->dense_bytes_per_token() + experts) << name;
  EXPECT_GE(record.loops(), static_cast<size_t>((*model)->config().n_layer)) << name;
  const uint64_t recorded = record.bytes();
  ASSERT_TRUE(ctx.eval(std::span<const int32_t>(&t, 1), logits).is_ok());
  EXPECT_EQ(record.bytes(), recorded) << name;
  EXPECT_GT(record.replay(ThreadPool::global()), 0.0) << name;
  EXPECT_GT(record.replay(ThreadPool::global(), ReadRecord::Replay::kKernels), 0.0) << name;
}

TEST(ReadRecord, OneDecodedTokenRecordsEveryWeightByteOfADenseModel) {
  ORK_REQUIRE_TESTDATA("models/tinystories656K-f32.gguf");
  check_one_token("models/tinystories656K-f32.gguf", "dense");
}

TEST(ReadRecord, OneDecodedTokenRecordsItsRoutedExperts) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  check_one_token("models/sotu-moe-f32.gguf", "moe");
}

}  // namespace
}  // namespace ork
