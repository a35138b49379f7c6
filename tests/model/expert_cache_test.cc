// The expert cache (issue 20): a Mixture-of-Experts orkpack whose routed
// experts stay on disk, read on demand into a cache within a memory budget,
// must give the fully resident model's logits and greedy tokens bit for bit
// - with budgets so small that nearly every expert is a miss, with either
// policy, on the fast kernels and the reference ones, in batches larger
// than the cache, and from two sequences at once. A file that shrinks under
// it is an error, not a crash; a budget too small is refused with numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include <unistd.h>

#include "core/direct_reader.h"
#include "core/thread_pool.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/synth.h"
#include "quant/packer.h"
#include "testdata.h"

namespace ork {
namespace {

std::string pack(const std::string& input, const std::string& name, const std::string& rule) {
  PackOptions o;
  o.input = input;
  o.output = ::testing::TempDir() + "/" + name;
  o.rules = {*parse_tier_rule(rule)};
  EXPECT_TRUE(pack_model(o).is_ok());
  return o.output;
}

// A small qwen3moe with more experts than the cache will hold: 16 experts,
// 4 routed, in 3 layers.
std::string synthetic_moe() {
  static const std::string path = [] {
    SynthOptions s;
    s.arch = "qwen3moe";
    s.n_embd = 128;
    s.n_layer = 3;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_vocab = 320;
    s.n_expert = 16;
    s.n_expert_used = 4;
    s.n_ff_exp = 96;
    s.n_ctx = 256;
    const std::string gguf = ::testing::TempDir() + "/experts-synth.gguf";
    EXPECT_TRUE(synth_write_file(s, gguf).is_ok());
    return pack(gguf, "experts-synth.orkpack", ".=i4");
  }();
  return path;
}

constexpr int kCtx = 64;
uint64_t reserve(const ModelConfig& c) { return Context::memory_bytes(c, kCtx, 32); }

// What a model computes for a prompt: every position's logits, then greedy
// decoding with each step's logits.
struct Transcript {
  std::vector<float> prompt;
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> steps;
  Status status;
};

Transcript transcribe(const Model& m, const std::vector<int32_t>& ids, int n_gen, bool fast = true,
                      ThreadPool* pool = nullptr) {
  Transcript t;
  Context ctx(m, kCtx, pool);
  ctx.set_fast_kernels(fast);
  auto all = ctx.eval(ids, /*all_logits=*/true);
  if (!all.is_ok()) {
    t.status = all.status();
    return t;
  }
  t.prompt = *all;
  const size_t vocab = all->size() / ids.size();
  std::vector<float> logits(all->end() - static_cast<std::ptrdiff_t>(vocab), all->end());
  for (int i = 0; i < n_gen; ++i) {
    const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    t.tokens.push_back(next);
    if (Status s = ctx.eval(std::span<const int32_t>(&next, 1), logits); !s.is_ok()) {
      t.status = s;
      return t;
    }
    t.steps.push_back(logits);
  }
  return t;
}

void expect_identical(const Transcript& a, const Transcript& b, const std::string& what) {
  ASSERT_TRUE(a.status.is_ok()) << what << ": " << a.status.to_string();
  ASSERT_TRUE(b.status.is_ok()) << what << ": " << b.status.to_string();
  EXPECT_TRUE(a.prompt == b.prompt) << what << ": the prompt's logits differ";
  EXPECT_EQ(a.tokens, b.tokens) << what;
  ASSERT_EQ(a.steps.size(), b.steps.size()) << what;
  for (size_t i = 0; i < a.steps.size(); ++i) EXPECT_TRUE(a.steps[i] == b.steps[i]) << what << ": step " << i;
}

// The budget whose cache holds exactly `slots` experts.
uint64_t budget_for(const std::string& path, int slots) {
  auto sizes = Model::resident_and_expert_bytes(path);
  EXPECT_TRUE(sizes.is_ok());
  auto probe = Model::load_experts_on_disk(path, 1ull << 40, reserve, {});
  EXPECT_TRUE(probe.is_ok()) << probe.status().to_string();
  const uint64_t slot = (*probe)->expert_cache()->stats().slot_bytes;
  return sizes->first + reserve((*probe)->config()) + slot * static_cast<uint64_t>(slots);
}

Result<std::unique_ptr<Model>> cached(const std::string& path, int slots, ExpertPolicy policy = ExpertPolicy::kLru) {
  ExpertCacheOptions o;
  o.policy = policy;
  return Model::load_experts_on_disk(path, budget_for(path, slots), reserve, o);
}

TEST(ExpertCache, TrainedMoeIsBitIdenticalAtAnyBudget) {
  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  const std::string path = pack(testing::testdata("models/sotu-moe-f32.gguf"), "experts-sotu.orkpack", ".=i4");
  auto resident = Model::load(path, MappedFile::Residency::kResident);
  ASSERT_TRUE(resident.is_ok());
  // The experts keep f16 scales in the file: the cache widens them as it reads.
  const OrkpackTensor* expert = (*resident)->orkpack()->find_tensor("blk.0.ffn_up_exps.weight.e0");
  ASSERT_NE(expert, nullptr);
  EXPECT_TRUE(expert->scales_f16);
  const std::vector<int32_t> ids = {1, 111, 89, 352, 1194, 40, 7, 300};
  const Transcript want = transcribe(**resident, ids, 24);
  const Transcript want_ref = transcribe(**resident, ids, 6, /*fast=*/false);
  // 4 layers of 8 experts, 2 routed: 4 slots is the least the cache takes
  // (a layer's and the next layer's), 32 holds them all.
  for (int slots : {4, 5, 9, 32}) {
    for (ExpertPolicy policy : {ExpertPolicy::kLru, ExpertPolicy::kLfu}) {
      const std::string what = std::to_string(slots) + " slots, " + expert_policy_name(policy);
      auto m = cached(path, slots, policy);
      ASSERT_TRUE(m.is_ok()) << m.status().to_string();
      ASSERT_NE((*m)->expert_cache(), nullptr);
      EXPECT_EQ((*m)->expert_cache()->capacity(), slots);
      expect_identical(want, transcribe(**m, ids, 24), what);
      expect_identical(want_ref, transcribe(**m, ids, 6, /*fast=*/false), what + ", reference kernels");
      const ExpertCacheStats s = (*m)->expert_cache()->stats();
      EXPECT_GT(s.requests, 0u);
      EXPECT_GT(s.bytes_read, 0u);
      if (slots < 32) {
        EXPECT_LT(s.hits, s.requests) << what << ": a cache smaller than the experts misses";
      }
    }
  }
}

TEST(ExpertCache, BatchesLargerThanTheCacheGoInGroups) {
  const std::string path = synthetic_moe();
  auto resident = Model::load(path, MappedFile::Residency::kResident);
  ASSERT_TRUE(resident.is_ok());
  // 20 tokens of 4 routed experts each touch most of the 16 experts of a
  // layer; a cache of 8 takes them 4 at a time.
  std::vector<int32_t> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(static_cast<int32_t>((i * 37 + 11) % 250 + 3));
  const Transcript want = transcribe(**resident, ids, 12);
  for (int slots : {8, 11, 48}) {
    auto m = cached(path, slots);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    expect_identical(want, transcribe(**m, ids, 12), std::to_string(slots) + " slots");
  }
}

TEST(ExpertCache, TwoSequencesAtOnceShareTheCache) {
  const std::string path = synthetic_moe();
  auto resident = Model::load(path, MappedFile::Residency::kResident);
  ASSERT_TRUE(resident.is_ok());
  const std::vector<int32_t> a = {5, 9, 200, 31, 77}, b = {100, 3, 3, 180};
  const Transcript want_a = transcribe(**resident, a, 16), want_b = transcribe(**resident, b, 16);
  auto m = cached(path, 8);  // two sequences' layers pinned at once: all 8 slots
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  // Each sequence on a pool of its own (a pool runs one loop at a time).
  ThreadPool pool_a(2), pool_b(2);
  Transcript got_a, got_b;
  std::thread ta([&] { got_a = transcribe(**m, a, 16, true, &pool_a); });
  std::thread tb([&] { got_b = transcribe(**m, b, 16, true, &pool_b); });
  ta.join();
  tb.join();
  expect_identical(want_a, got_a, "sequence a");
  expect_identical(want_b, got_b, "sequence b");
}

TEST(ExpertCache, AFileThatShrinksIsAnErrorNamingIt) {
  const std::string src = synthetic_moe();
  const std::string path = ::testing::TempDir() + "/experts-shrinking.orkpack";
  std::filesystem::copy_file(src, path, std::filesystem::copy_options::overwrite_existing);
  auto m = cached(path, 8);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  // Everything but the experts is in memory; the experts' bytes go away.
  auto pack = OrkpackFile::open(src);
  ASSERT_TRUE(pack.is_ok());
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(pack->data_section_offset())), 0);
  const Transcript t = transcribe(**m, {5, 9, 200}, 4);
  ASSERT_FALSE(t.status.is_ok());
  EXPECT_EQ(t.status.code(), StatusCode::kIo);
  EXPECT_NE(t.status.message().find(path), std::string::npos) << t.status.message();
  EXPECT_NE(t.status.message().find("shrank"), std::string::npos) << t.status.message();
  // And again: still an error, still no crash.
  EXPECT_FALSE(transcribe(**m, {6}, 1).status.is_ok());
}

// The open leaves the experts' values to the cache (checking them there
// would read the whole file): a NaN scale is refused when its expert is read.
TEST(ExpertCache, AnExpertsBadValuesAreAnErrorWhenRead) {
  const std::string src = synthetic_moe();
  const std::string path = ::testing::TempDir() + "/experts-nan.orkpack";
  std::filesystem::copy_file(src, path, std::filesystem::copy_options::overwrite_existing);
  {
    auto pack = OrkpackFile::open(src);
    ASSERT_TRUE(pack.is_ok());
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int e = 0; e < 16; ++e) {  // every expert of layer 0: any token meets one
      const OrkpackTensor* t = pack->find_tensor("blk.0.ffn_gate_exps.weight.e" + std::to_string(e));
      ASSERT_NE(t, nullptr);
      ASSERT_GT(t->scales_size, 0u);
      f.seekp(static_cast<std::streamoff>(pack->data_section_offset() + t->scales_offset));
      const uint16_t nan16 = 0x7E00;  // f16 scales: the cache widens them, then checks
      if (t->scales_f16) {
        f.write(reinterpret_cast<const char*>(&nan16), 2);
      } else {
        f.write(reinterpret_cast<const char*>(&nan), 4);
      }
    }
  }
  EXPECT_FALSE(Model::load(path).is_ok()) << "a whole load checks every tensor";
  auto m = cached(path, 8);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const Transcript t = transcribe(**m, {5, 9}, 2);
  ASSERT_FALSE(t.status.is_ok());
  EXPECT_EQ(t.status.code(), StatusCode::kCorrupt);
  EXPECT_NE(t.status.message().find("blk.0.ffn_gate_exps.weight.e"), std::string::npos) << t.status.message();
  EXPECT_NE(t.status.message().find("not finite"), std::string::npos) << t.status.message();
}

TEST(ExpertCache, ABudgetTooSmallIsRefusedWithTheNumbers) {
  const std::string path = synthetic_moe();
  // Room for 3 experts where 8 are needed (4 routed, twice).
  auto m = Model::load_experts_on_disk(path, budget_for(path, 3), reserve, {});
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(m.status().message().find("give at least"), std::string::npos) << m.status().message();
  // Not even the resident part.
  auto tiny = Model::load_experts_on_disk(path, 4096, reserve, {});
  ASSERT_FALSE(tiny.is_ok());
  EXPECT_NE(tiny.status().message().find("too small"), std::string::npos) << tiny.status().message();
  // A dense model has nothing to keep on disk.
  SynthOptions s;
  const std::string dense = ::testing::TempDir() + "/experts-dense.gguf";
  ASSERT_TRUE(synth_write_file(s, dense).is_ok());
  const std::string dense_pack = pack(dense, "experts-dense.orkpack", ".=i4");
  auto d = Model::load_experts_on_disk(dense_pack, 1ull << 30, reserve, {});
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnsupported);
}

TEST(ExpertCache, ABudgetThatHoldsTheModelLoadsItWhole) {
  const std::string path = synthetic_moe();
  auto whole = Model::load_within_budget(path, MappedFile::Residency::kResident, 1ull << 30, reserve, {});
  ASSERT_TRUE(whole.is_ok());
  EXPECT_EQ((*whole)->expert_cache(), nullptr);
  auto part = Model::load_within_budget(path, MappedFile::Residency::kResident, budget_for(path, 10), reserve, {});
  ASSERT_TRUE(part.is_ok()) << part.status().to_string();
  ASSERT_NE((*part)->expert_cache(), nullptr);
  EXPECT_EQ((*part)->expert_cache()->capacity(), 10);
}

TEST(DirectReader, ReadsAlignedSpansAndRefusesShortFiles) {
  const std::string path = ::testing::TempDir() + "/direct-reader.bin";
  std::vector<uint8_t> bytes(10000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 251);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  auto r = DirectReader::open(path);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  auto* dst = static_cast<uint8_t*>(std::aligned_alloc(kDirectAlign, 3 * kDirectAlign));
  for (auto [offset, n] : {std::pair<uint64_t, uint64_t>{100, 5000}, {4096, 4096}, {8191, 1809}, {0, 1}}) {
    EXPECT_LE(DirectReader::aligned_span(offset, n), 3 * kDirectAlign);
    ASSERT_TRUE(r->read(offset, n, dst).is_ok()) << offset;
    const uint8_t* at = dst + (offset - DirectReader::aligned_start(offset));
    EXPECT_TRUE(std::equal(at, at + n, bytes.begin() + static_cast<std::ptrdiff_t>(offset))) << offset;
  }
  const Status past = r->read(9000, 2000, dst);
  EXPECT_EQ(past.code(), StatusCode::kIo);
  EXPECT_NE(past.message().find(path), std::string::npos);
  std::free(dst);
  EXPECT_FALSE(DirectReader::open(path + ".missing").is_ok());
}

}  // namespace
}  // namespace ork
