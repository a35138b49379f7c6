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
  EXPECT_EQ(r.loop_bytes(0), 100u * 192u);
  EXPECT_EQ(r.loop_bytes(1), 32u * 256u + 32u * 4u);
  EXPECT_EQ(r.loop_kind(0), "100x96 f16");
  EXPECT_EQ(r.loop_kind(1), "32x512 i4");
  EXPECT_EQ(r.loop_seconds(0), 0.0);  // never ended
  r.end_loop();
  EXPECT_GT(r.loop_seconds(1), 0.0);
  std::vector<double> per_loop;
  const double all = r.replay(ThreadPool::global(), ReadRecord::Replay::kPlainRead, &per_loop);
  ASSERT_EQ(per_loop.size(), 2u);
  EXPECT_GT(per_loop[0], 0.0);
  EXPECT_GT(per_loop[1], 0.0);
  EXPECT_NEAR(per_loop[0] + per_loop[1], all, 1e-9);
  EXPECT_GT(r.replay(ThreadPool::global()), 0.0);
  EXPECT_GT(r.replay(ThreadPool::global(), ReadRecord::Replay::kKernels), 0.0);
  r.clear();
  EXPECT_EQ(r.loops(), 0u);
  r.end_loop();  // no loop to end: nothing happens
  EXPECT_EQ(r.bytes(), 0u);
  EXPECT_GE(r.replay(ThreadPool::global()), 0.0);
}

// Runs of one shape are counted; shapes of a loop listed in order.
TEST(ReadRecord, NamesALoopByItsShapes) {
  std::vector<uint8_t> a(8192 * 1024);
  QuantWeights big, small;
  big.kind = small.kind = CodeKind::kI4;
  big.p0 = small.p0 = a.data();
  big.rows = 8192, big.k = 2048;
  small.rows = 512, small.k = 2048;
  ReadRecord r;
  r.begin_loop();
  r.add_rows(big, 0, 8192);
  r.add_rows(small, 0, 512);
  r.add_rows(small, 0, 512);
  r.begin_loop();
  for (int e = 0; e < 16; ++e) r.add_rows(small, 0, 512);
  r.begin_loop();
  r.add_rows(big, 0, 100);  // part of a matrix: the rows read
  QuantWeights i8 = small;
  i8.kind = CodeKind::kI8;
  r.add_rows(i8, 0, 512);
  ASSERT_EQ(r.loops(), 3u);
  EXPECT_EQ(r.loop_kind(0), "8192x2048, 2 x 512x2048 i4");
  EXPECT_EQ(r.loop_kind(1), "16 x 512x2048 i4");
  EXPECT_EQ(r.loop_kind(2), "100x2048, 512x2048 mixed");
  EXPECT_EQ(r.loop_bytes(0) + r.loop_bytes(1) + r.loop_bytes(2), r.bytes());
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
  // Every loop ran and was timed, and the loops' bytes make the token's.
  uint64_t loop_sum = 0;
  for (size_t l = 0; l < record.loops(); ++l) {
    EXPECT_GT(record.loop_seconds(l), 0.0) << name << " loop " << l << " " << record.loop_kind(l);
    loop_sum += record.loop_bytes(l);
  }
  EXPECT_EQ(loop_sum, record.bytes()) << name;
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

// A float GGUF as it is: its matmuls take the engine's single-matrix float
// path, which records and times its loops too.
TEST(ReadRecord, AFloatModelsLoopsAreRecordedAndTimed) {
  ORK_REQUIRE_TESTDATA("models/tinystories656K-f32.gguf");
  auto model = Model::load(testing::testdata("models/tinystories656K-f32.gguf"));
  ASSERT_TRUE(model.is_ok());
  Context ctx(**model, 16);
  std::vector<float> logits;
  ReadRecord record;
  ctx.set_read_record(&record);
  const int32_t t = 7;
  ASSERT_TRUE(ctx.eval(std::span<const int32_t>(&t, 1), logits).is_ok());
  ctx.set_read_record(nullptr);
  ASSERT_GE(record.loops(), static_cast<size_t>((*model)->config().n_layer));
  for (size_t l = 0; l < record.loops(); ++l) {
    EXPECT_GT(record.loop_seconds(l), 0.0) << "loop " << l;
    EXPECT_TRUE(record.loop_kind(l).ends_with(" f32")) << record.loop_kind(l);
  }
}

TEST(ReadRecord, OneDecodedTokenRecordsItsRoutedExperts) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  check_one_token("models/sotu-moe-f32.gguf", "moe");
}

}  // namespace
}  // namespace ork
