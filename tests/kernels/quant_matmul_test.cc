// Every compiled SIMD target of the integer kernels against the scalar
// reference, bit for bit, over every code kind, sizes, tails, token and row
// ranges, and misaligned planes; and the kernels' codes against the tier
// format's own dequantizer.
#include "kernels/cpu/quant_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <sys/mman.h>
#include <unistd.h>
#include <string>
#include <vector>

#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "kernels/cpu/targets.h"
#include "kernels/ref/quant_matmul.h"
#include "core/half.h"
#include "quant/carry.h"
#include "quant/test_matrices.h"

namespace ork {
namespace {

class EveryTarget : public ::testing::Test {
 protected:
  void TearDown() override { cpu::force_target(-1); }
};

constexpr CodeKind kKinds[] = {CodeKind::kI4, CodeKind::kNf4, CodeKind::kI5,
                               CodeKind::kI6, CodeKind::kI8,  CodeKind::kI8s};
// The block kinds (the carried tiers).
constexpr CodeKind kBlockKinds[] = {CodeKind::kQ2k, CodeKind::kQ3k, CodeKind::kQ4k, CodeKind::kQ5k, CodeKind::kQ6k,
                                    CodeKind::kQ80, CodeKind::kQ40, CodeKind::kQ41, CodeKind::kQ50,
                                    CodeKind::kQ51, CodeKind::kIq4nl, CodeKind::kIq4xs};

// Random planes for `rows` x `k` weights of a kind, starting `misalign`
// bytes past an allocation so no load may assume alignment.
struct RandomWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  QuantWeights view;

  RandomWeights(CodeKind kind, int64_t rows, int64_t k, int misalign, std::mt19937& rng) {
    const int64_t b0 = plane0_row_bytes(kind, k) * rows, b1 = plane1_row_bytes(kind, k) * rows;
    bytes.resize(static_cast<size_t>(misalign + b0 + b1));
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
    std::uniform_real_distribution<float> scale(0.001f, 0.1f);
    scales.resize(static_cast<size_t>(rows));
    for (auto& s : scales) s = scale(rng);
    view.kind = kind;
    view.p0 = bytes.data() + misalign;
    view.p1 = b1 > 0 ? view.p0 + b0 : nullptr;
    view.scales = scales.data();
    view.scale_mul = kind == CodeKind::kNf4 ? 1.0f / 127.0f : kind == CodeKind::kI8s ? 1.0f / 16.0f : 1.0f;
    view.rows = rows;
    view.k = k;
  }
};

// The block kinds' random planes with valid super-block headers: d and
// dmin finite and small, q4k's sub-scales and mins below 64.
void make_headers_valid(RandomWeights& w, std::mt19937& rng) {
  std::uniform_real_distribution<float> scale(1e-3f, 1e-2f);
  const CodeKind kind = w.view.kind;
  if (!block_kind(kind)) return;  // i8 through the block path: row scales, no headers
  const CarriedLayout l = carried_layout(block_tier(kind));
  const int64_t b1 = plane1_row_bytes(kind, w.view.k);
  const bool k_mins = kind == CodeKind::kQ4k || kind == CodeKind::kQ5k;
  const bool two_scales = k_mins || kind == CodeKind::kQ2k;
  for (int64_t r = 0; r < w.view.rows; ++r) {
    w.scales[static_cast<size_t>(r)] = 1.0f;
    auto* headers = const_cast<uint8_t*>(w.view.p1) + r * b1 + block_headers_offset(kind, w.view.k);
    for (int64_t b = 0; b < w.view.k / l.block; ++b) {
      uint8_t* h = headers + b * l.header_bytes;
      const uint16_t d = f32_to_f16(scale(rng)), second = f32_to_f16(scale(rng));
      std::memcpy(h, &d, 2);
      if (two_scales || l.header_bytes == 4) std::memcpy(h + 2, &second, 2);
      for (int i = 4; k_mins && i < 20; ++i) h[i] &= 63;
      // q3k's sub-scales are six-bit less 32, as the orkpack reader checks.
      for (int i = 2; kind == CodeKind::kQ3k && i < 18; ++i) h[i] = static_cast<uint8_t>((h[i] & 63) - 32);
    }
  }
}

struct RandomActs {
  std::vector<int8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> sum;
  QuantActs view;

  RandomActs(int n, int64_t k, int misalign, std::mt19937& rng) {
    std::uniform_int_distribution<int> act(-127, 127);
    q.resize(static_cast<size_t>(misalign + n * k));
    for (auto& v : q) v = static_cast<int8_t>(act(rng));
    scale.resize(static_cast<size_t>(n));
    sum.resize(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) {
      scale[static_cast<size_t>(t)] = 0.01f * static_cast<float>(t + 1);
      int32_t s = 0;
      for (int64_t j = 0; j < k; ++j) s += q[static_cast<size_t>(misalign + t * k + j)];
      sum[static_cast<size_t>(t)] = s;
    }
    view = {q.data() + misalign, scale.data(), sum.data(), k, n};
  }
};

TEST_F(EveryTarget, QuantizeActsMatchesReference) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int64_t k : {1, 7, 8, 31, 32, 33, 100, 2048, 2051}) {
    const int n = 3;
    std::vector<float> x(static_cast<size_t>(n * k + 1));
    for (auto& v : x) v = normal(rng);
    // Token 1 all zero: scale 0, codes 0.
    std::fill(x.begin() + 1 + k, x.begin() + 1 + 2 * k, 0.0f);
    std::vector<int8_t> want(static_cast<size_t>(n * k)), got(want.size());
    std::vector<float> want_s(n), got_s(n);
    std::vector<int32_t> want_sum(n), got_sum(n);
    ref::quantize_acts(x.data() + 1, n, k, want.data(), want_s.data(), want_sum.data());
    EXPECT_EQ(want_s[1], 0.0f);
    for (int t = 0; t < cpu::compiled_target_count(); ++t) {
      cpu::force_target(t);
      cpu::quantize_acts(x.data() + 1, n, k, got.data(), got_s.data(), got_sum.data());
      EXPECT_EQ(got, want) << cpu::target_name(t) << " k=" << k;
      EXPECT_EQ(got_s, want_s) << cpu::target_name(t) << " k=" << k;
      EXPECT_EQ(got_sum, want_sum) << cpu::target_name(t) << " k=" << k;
    }
  }
}

TEST_F(EveryTarget, QuantMatmulMatchesReferenceForEveryKind) {
  std::mt19937 rng(2);
  struct Shape {
    int64_t rows, k;
    int n;
    int64_t begin, end;
  };
  // Decode (n = 1..3; one token over long rows, whole and in part, with an
  // odd group), prefill tiles (n >= 4), token chunks (n > 64), row tails of
  // every residue, partial row ranges, and long rows (an odd group at the
  // end) under tiles of 8, 4 and 1 tokens; batches of 4 to 8 tokens; the
  // last tokens of a chunk in a padded tile.
  const Shape shapes[] = {{1, 32, 1, 0, 1},    {7, 64, 1, 0, 7},    {13, 96, 2, 1, 12},  {5, 160, 3, 0, 5},
                          {8, 32, 4, 0, 8},    {9, 256, 5, 2, 9},   {6, 64, 7, 0, 6},    {3, 2048, 1, 0, 3},
                          {10, 2048, 1, 1, 9}, {6, 2144, 1, 0, 6},  {4, 128, 70, 0, 4},  {11, 480, 9, 3, 10},
                          {5, 2144, 13, 0, 5}, {3, 16416, 13, 1, 3},
                          // Batches of 4 to 8 tokens (the server's slots): odd rows, tokens in tiles of 4 and 1.
                          {9, 2144, 4, 0, 9},  {7, 2048, 6, 1, 7},  {12, 96, 8, 0, 12}, {5, 2144, 8, 0, 5},
                          {2, 64, 5, 0, 2},    {1, 32, 8, 0, 1},
                          // A chunk's last 2-7 tokens in one padded tile (AVX-512 VNNI): 2, 3, 7 after a tile of 8.
                          {6, 2144, 10, 0, 6}, {5, 96, 11, 1, 5},  {9, 2048, 15, 0, 9},
                          // Decode of rows of 3, 5, 66 and 67 groups, one token.
                          {5, 96, 1, 0, 5},    {4, 160, 1, 1, 4},   {3, 2112, 1, 0, 3},  {6, 2144, 1, 1, 5},
                          // Decode's streams several rows long, with a tail of 1-3 rows (DecodeFar4, DecodeFar).
                          {23, 96, 1, 2, 21},  {17, 2048, 1, 0, 17}, {42, 160, 1, 3, 41}};
  for (CodeKind kind : kKinds) {
    for (const Shape& s : shapes) {
      for (int misalign : {0, 1}) {
        RandomWeights w(kind, s.rows, s.k, misalign, rng);
        RandomActs a(s.n, s.k, misalign * 3, rng);
        const int64_t ldy = s.rows + 2;
        // Eight tokens' rows beyond the batch: a padded tile writes none of them.
        std::vector<float> want(static_cast<size_t>((s.n + 8) * ldy), -7.0f);
        ref::quant_matmul(w.view, a.view, want.data(), ldy, s.begin, s.end);
        for (int t = 0; t < cpu::compiled_target_count(); ++t) {
          cpu::force_target(t);
          std::vector<float> got(want.size(), -7.0f);
          cpu::quant_matmul(w.view, a.view, got.data(), ldy, s.begin, s.end);
          ASSERT_EQ(got, want) << cpu::target_name(t) << " " << code_kind_name(kind) << " rows=" << s.rows << " k=" << s.k
                               << " n=" << s.n << " misalign=" << misalign;
        }
      }
    }
  }
}

// The block kinds: every target against the reference to float rounding
// (blocks are summed in another order), over decode, batches of 2 and 3,
// tiles of 4, token chunks, row tails and partial ranges.
struct BlockShape {
  int64_t rows, k;
  int n;
  int64_t begin, end;
};

void check_block_case(CodeKind kind, const BlockShape& s, int misalign, bool floats, std::mt19937& rng) {
  RandomWeights w(kind, s.rows, s.k, misalign, rng);
  make_headers_valid(w, rng);
  RandomActs a(s.n, s.k, misalign * 3, rng);
  // With the floats, the kernels requantize them per activation block.
  std::vector<float> f32;
  if (floats) {
    std::normal_distribution<float> normal(0.0f, 2.0f);
    f32.resize(static_cast<size_t>(s.n * s.k));
    for (auto& v : f32) v = normal(rng);
    for (int64_t i = 0; i < s.k; i += 97) f32[static_cast<size_t>(i)] *= 30.0f;  // outliers: blocks differ
    a.view.f32 = f32.data();
  }
  std::vector<int8_t> block_q;
  std::vector<float> block_scale;
  ref::block_acts(a.view, act_block(kind), block_q, block_scale);
  const int64_t nb = s.k / act_block(kind);
  const int64_t ldy = s.rows + 2;
  std::vector<float> want(static_cast<size_t>(s.n * ldy), -7.0f);
  ref::quant_matmul(w.view, a.view, want.data(), ldy, s.begin, s.end);
  // What rounding can move: the sum of |w * a| over the row.
  std::vector<float> mag(want.size(), 0.0f), row(static_cast<size_t>(s.k));
  for (int64_t r = s.begin; r < s.end; ++r) {
    ref::dequantize_codes_row(w.view, r, row.data());
    for (int t = 0; t < s.n; ++t) {
      double m = 0;
      for (int64_t j = 0; j < s.k; ++j) {
        m += std::fabs(row[static_cast<size_t>(j)] * block_q[static_cast<size_t>(t * s.k + j)] *
                       block_scale[static_cast<size_t>(t * nb + j / act_block(kind))]);
      }
      mag[static_cast<size_t>(t * ldy + r)] = static_cast<float>(m);
    }
  }
  for (int t = 0; t < cpu::compiled_target_count(); ++t) {
    cpu::force_target(t);
    std::vector<float> got(want.size(), -7.0f);
    cpu::quant_matmul(w.view, a.view, got.data(), ldy, s.begin, s.end);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 2e-6f * mag[i]) << cpu::target_name(t) << " " << code_kind_name(kind) << " rows=" << s.rows
                                                  << " k=" << s.k << " n=" << s.n << " misalign=" << misalign
                                                  << (floats ? " per-block activations" : "") << " at " << i;
    }
  }
}

TEST_F(EveryTarget, BlockKindsMatchReference) {
  std::mt19937 rng(3);
  const BlockShape shapes[] = {{1, 256, 1, 0, 1},    {7, 512, 1, 0, 7},  {5, 256, 2, 0, 5},  {9, 768, 3, 1, 9},
                               {4, 2048, 4, 0, 4},   {6, 256, 5, 0, 6},  {3, 1024, 9, 0, 3}, {10, 2048, 1, 1, 9},
                               {4, 256, 70, 0, 4},   {5, 512, 13, 0, 5}, {3, 4096, 1, 0, 3}, {2, 256, 8, 0, 2},
                               {11, 5632, 1, 0, 11}, {4, 1280, 6, 1, 4},
                               // Sixteen rows at once (q4_0 and q4_K on AVX-512 VNNI), with tails.
                               {37, 512, 4, 0, 37},  {35, 2048, 9, 2, 35}, {50, 768, 70, 5, 47}};
  // The 32-weight kinds' rows are any number of groups: odd counts too.
  // And blocks of sixteen rows (AVX-512 VNNI's q4_0 batch tile) with tails
  // and partial ranges, groups in eights and not; decode's rows of 1, 3, 5
  // and 67 groups and of 2, 6 and 66 (its steps of four, every remainder).
  const BlockShape q80_shapes[] = {{3, 32, 1, 0, 3},     {5, 96, 1, 0, 5},     {7, 2144, 1, 1, 7},
                                   {4, 160, 3, 0, 4},    {6, 2144, 9, 0, 6},   {37, 256, 4, 0, 37},
                                   {35, 2144, 9, 2, 35}, {16, 96, 12, 0, 16},  {50, 800, 70, 5, 47},
                                   // Decode's four-group steps (AVX-512 VNNI) ending in 2 groups.
                                   {3, 64, 1, 0, 3},     {4, 192, 1, 1, 4},    {5, 2112, 1, 0, 5}};
  for (CodeKind kind : kBlockKinds) {
    for (int misalign : {0, 1}) {
      for (bool floats : {false, true}) {
        for (const BlockShape& s : shapes) check_block_case(kind, s, misalign, floats, rng);
        if (!block32_kind(kind)) continue;
        for (const BlockShape& s : q80_shapes) check_block_case(kind, s, misalign, floats, rng);
      }
    }
  }
}

// A padded tile reads the scales and sums of its batch's tokens only:
// those arrays end on a page with no access after it, so a read past the
// last token faults (the sanitizer build runs only the AVX2 tiles).
TEST_F(EveryTarget, PaddedTilesReadNothingPastTheLastToken) {
  std::mt19937 rng(23);
  const long page = sysconf(_SC_PAGESIZE);
  for (int n : {6, 10, 13, 15}) {  // padded tiles of 4 and 8 after none or one tile of 8
    // Pages: scales, no access, sums, no access.
    void* mem = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    char* base = static_cast<char*>(mem);
    ASSERT_EQ(mprotect(base + page, page, PROT_NONE), 0);
    ASSERT_EQ(mprotect(base + 3 * page, page, PROT_NONE), 0);
    const int64_t k = 512;
    RandomActs a(n, k, 0, rng);
    auto* scale = reinterpret_cast<float*>(base + page) - n;
    auto* sum = reinterpret_cast<int32_t*>(base + 3 * page) - n;
    std::copy(a.scale.begin(), a.scale.end(), scale);
    std::copy(a.sum.begin(), a.sum.end(), sum);
    const QuantActs edge{a.view.q, scale, sum, k, n};
    for (CodeKind kind : kKinds) {
      RandomWeights w(kind, 9, k, 0, rng);
      std::vector<float> want(static_cast<size_t>(n * 9)), got(want.size());
      ref::quant_matmul(w.view, a.view, want.data(), 9, 0, 9);
      for (int t = 0; t < cpu::compiled_target_count(); ++t) {
        cpu::force_target(t);
        cpu::quant_matmul(w.view, edge, got.data(), 9, 0, 9);
        ASSERT_EQ(got, want) << cpu::target_name(t) << " " << code_kind_name(kind) << " n=" << n;
      }
    }
    munmap(mem, 4 * page);
  }
}

// Decode reads nothing past a row: each plane of the matrix ends on a page
// with no access after it, so a load past the last row's last group
// faults (the block kinds' 512-bit decode tile reads its last step of four
// groups under masks; the sanitizer build runs only the AVX2 tiles, so
// only this test sees such a read). Rows of 1 to 3 groups past the last
// step of four, rows of 1 and 2 groups, and whole super-blocks; every
// kind, every target.
TEST_F(EveryTarget, DecodeReadsNothingPastTheLastRow) {
  std::mt19937 rng(29);
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<CodeKind> kinds(std::begin(kKinds), std::end(kKinds));
  kinds.insert(kinds.end(), std::begin(kBlockKinds), std::end(kBlockKinds));
  for (CodeKind kind : kinds) {
    const std::vector<int64_t> ks = block_kind(kind) && !block32_kind(kind) ? std::vector<int64_t>{256, 768}
                                                                            : std::vector<int64_t>{32, 64, 96, 160, 2112};
    for (int64_t k : ks) {
      for (int64_t rows : {1, 3}) {
        RandomWeights w(kind, rows, k, 0, rng);
        make_headers_valid(w, rng);
        const size_t b0 = static_cast<size_t>(plane0_row_bytes(kind, k) * rows);
        const size_t b1 = static_cast<size_t>(plane1_row_bytes(kind, k) * rows);
        const size_t span0 = (b0 + page - 1) / page * page, span1 = (b1 + page - 1) / page * page;
        // Pages: plane 0 (ending at the page's end), no access, plane 1, no access.
        const size_t total = span0 + span1 + 2 * page;
        void* mem = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(mem, MAP_FAILED);
        auto* base = static_cast<uint8_t*>(mem);
        ASSERT_EQ(mprotect(base + span0, page, PROT_NONE), 0);
        ASSERT_EQ(mprotect(base + span0 + page + span1, page, PROT_NONE), 0);
        QuantWeights edge = w.view;
        auto* p0 = base + span0 - b0;
        std::memcpy(p0, w.view.p0, b0);
        edge.p0 = p0;
        if (b1 > 0) {
          auto* p1 = base + span0 + page + span1 - b1;
          std::memcpy(p1, w.view.p1, b1);
          edge.p1 = p1;
        }
        RandomActs a(1, k, 0, rng);
        std::vector<float> want(static_cast<size_t>(rows)), got(want.size());
        ref::quant_matmul(w.view, a.view, want.data(), rows, 0, rows);
        for (int t = 0; t < cpu::compiled_target_count(); ++t) {
          cpu::force_target(t);
          cpu::quant_matmul(edge, a.view, got.data(), rows, 0, rows);
          for (size_t i = 0; i < want.size(); ++i) {
            // The block kinds sum in another order (BlockKindsMatchReference bounds it); this is about faults.
            ASSERT_NEAR(got[i], want[i], 1e-3f * (1.0f + std::fabs(want[i])))
                << cpu::target_name(t) << " " << code_kind_name(kind) << " k=" << k << " rows=" << rows;
          }
        }
        munmap(mem, total);
      }
    }
  }
}

// i8 given its activations' floats quantizes them per 32 (as q8_0 does) and
// runs on the 32-weight block path: every target against the reference to
// float rounding, over decode, batches, token chunks, odd groups and row
// tails.
TEST_F(EveryTarget, I8GivenFloatsMatchesReference) {
  std::mt19937 rng(11);
  const BlockShape shapes[] = {{3, 32, 1, 0, 3},    {5, 96, 1, 0, 5},     {7, 2144, 1, 1, 7},  {10, 2048, 1, 1, 9},
                               {4, 160, 3, 0, 4},   {6, 2144, 9, 0, 6},   {37, 256, 4, 0, 37}, {4, 256, 70, 0, 4},
                               {35, 2144, 9, 2, 35}, {16, 96, 12, 0, 16}, {11, 5632, 1, 0, 11}, {50, 800, 70, 5, 47}};
  for (int misalign : {0, 1}) {
    for (const BlockShape& s : shapes) check_block_case(CodeKind::kI8, s, misalign, true, rng);
  }
}

// ... and that is what lowers its error: against the exact float product
// of its weights and the floats, activations whose blocks differ in size
// (one block in eight a hundred times the rest) lose less than half as
// much with a scale per 32 as with one per token (measured 3.2x less: the
// large blocks' rounding is the same either way, the small ones' vanishes).
TEST_F(EveryTarget, I8ScalesPerBlockLoseLessThanPerToken) {
  std::mt19937 rng(12);
  const int64_t rows = 64, k = 1024;
  RandomWeights w(CodeKind::kI8, rows, k, 0, rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) x[static_cast<size_t>(j)] = normal(rng) * ((j / 32) % 8 == 0 ? 100.0f : 1.0f);
  std::vector<int8_t> q(static_cast<size_t>(k));
  float scale = 0.0f;
  int32_t sum = 0;
  ref::quantize_acts(x.data(), 1, k, q.data(), &scale, &sum);
  QuantActs per_token{q.data(), &scale, &sum, k, 1};
  QuantActs per_block = per_token;
  per_block.f32 = x.data();
  // The error of each against the exact product, over the rows whose
  // small blocks matter (all of them: the weights are random bytes).
  std::vector<float> row(static_cast<size_t>(k));
  for (int t = 0; t < cpu::compiled_target_count(); ++t) {
    cpu::force_target(t);
    std::vector<float> y_token(static_cast<size_t>(rows)), y_block(static_cast<size_t>(rows));
    cpu::quant_matmul(w.view, per_token, y_token.data(), rows, 0, rows);
    cpu::quant_matmul(w.view, per_block, y_block.data(), rows, 0, rows);
    double err_token = 0, err_block = 0;
    for (int64_t r = 0; r < rows; ++r) {
      ref::dequantize_codes_row(w.view, r, row.data());
      double exact = 0;
      for (int64_t j = 0; j < k; ++j) exact += static_cast<double>(row[static_cast<size_t>(j)]) * x[static_cast<size_t>(j)];
      err_token += std::fabs(y_token[static_cast<size_t>(r)] - exact);
      err_block += std::fabs(y_block[static_cast<size_t>(r)] - exact);
    }
    EXPECT_LT(err_block * 2, err_token) << cpu::target_name(t) << " per block " << err_block << ", per token " << err_token;
  }
}

// The block kinds' largest codes and sub-scales against activations at
// +-127: no int16 pair sum or int32 block sum may overflow.
TEST_F(EveryTarget, BlockKindsExtremeCodesDoNotOverflow) {
  std::mt19937 rng(9);
  const int64_t k = 512;
  for (CodeKind kind : kBlockKinds) {
    for (uint8_t fill : {uint8_t{0xFF}, uint8_t{0x00}, uint8_t{0x80}}) {
      RandomWeights w(kind, 2, k, 0, rng);
      std::fill(w.bytes.begin(), w.bytes.end(), fill);
      make_headers_valid(w, rng);
      // Sub-scales at their largest: 63 for q4k / q5k, -128 / 127 for q6k, q3k and iq4xs.
      const int64_t b1 = plane1_row_bytes(kind, k);
      for (int64_t r = 0; r < 2; ++r) {
        auto* h = const_cast<uint8_t*>(w.view.p1) + r * b1 + block_headers_offset(kind, k);
        for (int64_t b = 0; b < k / kSuperBlock && !block32_kind(kind); ++b) {
          const bool nibbles = kind == CodeKind::kQ2k;  // scale and min, 15 each at most
          uint8_t* sc = h + b * carried_layout(block_tier(kind)).header_bytes +
                        (kind == CodeKind::kQ4k || kind == CodeKind::kQ5k || nibbles ? 4 : 2);
          const int n = kind == CodeKind::kQ6k || kind == CodeKind::kQ3k || nibbles ? 16 : 8;
          for (int i = 0; i < n; ++i) {
            sc[i] = nibbles ? 0xFF : kind == CodeKind::kQ4k || kind == CodeKind::kQ5k ? 63 : (fill == 0x80 ? 0x80 : 0x7F);
          }
        }
      }
      for (int8_t av : {int8_t{127}, int8_t{-127}}) {
        RandomActs a(1, k, 0, rng);
        std::fill(a.q.begin(), a.q.end(), av);
        std::vector<float> want(2), got(2);
        ref::quant_matmul(w.view, a.view, want.data(), 2, 0, 2);
        for (int t = 0; t < cpu::compiled_target_count(); ++t) {
          cpu::force_target(t);
          cpu::quant_matmul(w.view, a.view, got.data(), 2, 0, 2);
          for (int i = 0; i < 2; ++i) {
            EXPECT_NEAR(got[i], want[i], 1e-5f * std::fabs(want[i]) + 1e-6f)
                << cpu::target_name(t) << " " << code_kind_name(kind) << " fill=" << int{fill} << " a=" << int{av};
          }
        }
      }
    }
  }
}

// The embedding lookup: every kind's rows as floats, bit for bit with the
// reference on every target, whole groups and an odd group at the end.
TEST_F(EveryTarget, DequantizeRowMatchesReference) {
  std::mt19937 rng(4);
  for (CodeKind kind : {CodeKind::kI4, CodeKind::kNf4, CodeKind::kI5, CodeKind::kI6, CodeKind::kI8, CodeKind::kI8s,
                        CodeKind::kQ2k, CodeKind::kQ3k, CodeKind::kQ4k, CodeKind::kQ5k, CodeKind::kQ6k, CodeKind::kQ80, CodeKind::kQ40,
                        CodeKind::kQ41, CodeKind::kQ50, CodeKind::kQ51, CodeKind::kIq4nl, CodeKind::kIq4xs}) {
    for (int64_t k : {32, 64, 96, 2048, 2080}) {
      if (block_kind(kind) && !block32_kind(kind) && k % kSuperBlock != 0) continue;
      for (int misalign : {0, 1}) {
        const int64_t rows = 3;
        RandomWeights w(kind, rows, k, misalign, rng);
        if (block_kind(kind)) make_headers_valid(w, rng);
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<float> want(static_cast<size_t>(k));
          ref::dequantize_codes_row(w.view, r, want.data());
          for (int t = 0; t < cpu::compiled_target_count(); ++t) {
            cpu::force_target(t);
            std::vector<float> got(want.size(), -7.0f);
            cpu::dequantize_row(w.view, r, got.data());
            ASSERT_EQ(got, want) << cpu::target_name(t) << " " << code_kind_name(kind) << " k=" << k << " r=" << r;
          }
        }
      }
    }
  }
}

// The largest products each kind can form, with activations at +-127, for
// one token and batches: the int16 pair sums must not saturate (nor the
// unsigned nf4 codes of the dot product overflow).
TEST_F(EveryTarget, ExtremeCodesDoNotSaturate) {
  const int64_t k = 256;
  for (CodeKind kind : kKinds) {
    for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0x88}, uint8_t{0x80}}) {
      std::vector<uint8_t> planes(static_cast<size_t>(plane0_row_bytes(kind, k) + plane1_row_bytes(kind, k)), fill);
      const float one = 1.0f;
      QuantWeights w{kind, planes.data(), plane1_row_bytes(kind, k) > 0 ? planes.data() + plane0_row_bytes(kind, k) : nullptr,
                     &one, 1.0f, 1, k};
      // One token (decode's tiles) and batches of 4 and 8 (the batch tiles).
      for (int n : {1, 4, 8}) {
        for (int8_t av : {int8_t{127}, int8_t{-127}}) {
          std::vector<int8_t> q(static_cast<size_t>(n * k), av);
          const std::vector<float> scale(static_cast<size_t>(n), 1.0f);
          const std::vector<int32_t> sum(static_cast<size_t>(n), av * static_cast<int32_t>(k));
          const QuantActs a{q.data(), scale.data(), sum.data(), k, n};
          std::vector<float> want(static_cast<size_t>(n));
          ref::quant_matmul(w, a, want.data(), 1, 0, 1);
          int64_t exact = 0;
          for (int64_t j = 0; j < k; ++j) exact += static_cast<int64_t>(ref::weight_code(w, 0, j)) * av;
          ASSERT_EQ(want[0], static_cast<float>(exact));
          for (int t = 0; t < cpu::compiled_target_count(); ++t) {
            cpu::force_target(t);
            std::vector<float> got(static_cast<size_t>(n));
            cpu::quant_matmul(w, a, got.data(), 1, 0, 1);
            EXPECT_EQ(got, want) << cpu::target_name(t) << " " << code_kind_name(kind) << " fill=" << int{fill}
                                 << " a=" << int{av} << " n=" << n;
          }
        }
      }
    }
  }
}

// The kernel's codes are the format's: code * scale * scale_mul is the
// tier's own dequantized weight (exactly, but for nf4's int8 codebook), and
// so is the embedding lookup's row.
TEST(QuantWeights, CodesMatchTheTierDequantizer) {
  const int64_t rows = 6, k = 96;
  const std::vector<float> m = make_test_matrix(MatrixKind::kStudentT4, rows, k, 5);
  for (Tier tier : {Tier::kI4, Tier::kNf4, Tier::kI5, Tier::kI6, Tier::kI8, Tier::kI8s}) {
    std::vector<uint8_t> data(tier_data_bytes(tier, rows, k));
    std::vector<float> scales(rows);
    quantize_tier(tier, m.data(), nullptr, rows, k, data.data(), scales.data());
    const TierTensor t{tier, data.data(), scales.data(), rows, k};
    for (bool high_only : {false, true}) {
      if (high_only && tier != Tier::kI8s) continue;
      const QuantWeights w = quant_weights(t, high_only);
      std::vector<float> row(static_cast<size_t>(k));
      for (int64_t r = 0; r < rows; ++r) {
        if (high_only) {
          dequantize_i8s_high_row(t, r, row.data());
        } else {
          dequantize_tier_row(t, r, row.data());
        }
        for (int64_t j = 0; j < k; ++j) {
          const float code = static_cast<float>(ref::weight_code(w, r, j)) * w.scale_mul;
          const float tol = tier == Tier::kNf4 ? 0.5f / 127.0f * scales[r] : 1e-6f * scales[r];
          ASSERT_NEAR(code * scales[r], row[static_cast<size_t>(j)], tol)
              << tier_name(tier) << (high_only ? " high" : "") << " r=" << r << " j=" << j;
        }
        // The embedding lookup's row is the tier's, exactly (nf4: as above).
        std::vector<float> looked_up(row.size());
        ref::dequantize_codes_row(w, r, looked_up.data());
        if (tier != Tier::kNf4) {
          ASSERT_EQ(looked_up, row) << tier_name(tier) << (high_only ? " high" : "") << " r=" << r;
        }
      }
    }
  }
}

TEST(QuantWeights, Nf4CodesAreTheRoundedCodebook) {
  const std::array<float, 16>& levels = nf4_codebook();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(kNf4Codes[i], static_cast<int8_t>(std::lround(127.0f * levels[i]))) << i;
}

}  // namespace
}  // namespace ork

namespace ork {
namespace {

// The targets this run covers, in the log: on x86-64 the best of AVX-512 /
// AVX2 and at least SSSE3 and scalar besides (AVX2 and scalar alone in the
// sanitizer and fuzz builds, ORK_AVX2_KERNELS_ONLY); on aarch64 NEON (the
// baseline there, so Highway compiles no scalar fallback).
TEST(Targets, TheExpectedOnesAreCompiledAndRunnable) {
  std::string names;
  for (int t = 0; t < cpu::compiled_target_count(); ++t) names += std::string(cpu::target_name(t)) + " ";
  std::printf("SIMD targets under test: %s\n", names.c_str());
#if defined(__aarch64__)
  EXPECT_NE(names.find("NEON"), std::string::npos) << names;
  // Where the CPU has the dot product, its kernels are tested beside plain NEON.
  EXPECT_EQ(names.find("NEON_DOTPROD") != std::string::npos, (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0) << names;
#elif defined(ORK_AVX2_KERNELS_ONLY)
  EXPECT_EQ(cpu::compiled_target_count(), 2) << names;
  EXPECT_NE(names.find("AVX2"), std::string::npos) << names;
#else
  EXPECT_GE(cpu::compiled_target_count(), 3) << names;
  EXPECT_NE(names.find("SSSE3"), std::string::npos) << names;
  // Where the CPU has AVX-512 VNNI, its kernels are tested beside plain AVX3.
  const bool avx3 = names.find("AVX3 ") != std::string::npos;
  EXPECT_EQ(names.find("AVX3_VNNI") != std::string::npos, avx3 && __builtin_cpu_supports("avx512vnni")) << names;
#endif
}

}  // namespace
}  // namespace ork
