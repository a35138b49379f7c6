#include "engines/cpu/read_replay.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include <fmt/format.h>

#include "core/thread_pool.h"
#include "kernels/cpu/quant_matmul.h"

namespace ork {
namespace {

int64_t float_row_bytes(cpu::FloatWeights kind, int64_t k) { return k * (kind == cpu::FloatWeights::kF32 ? 4 : 2); }

std::string_view float_kind_name(cpu::FloatWeights kind) {
  return kind == cpu::FloatWeights::kF32 ? "f32" : kind == cpu::FloatWeights::kF16 ? "f16" : "bf16";
}

}  // namespace

void ReadRecord::begin_loop() {
  loop_start_ = std::chrono::steady_clock::now();
  if (!loop_begin_.empty() && loop_begin_.back() == rows_.size()) return;  // an empty loop reads nothing
  loop_begin_.push_back(rows_.size());
  loop_bytes_.push_back(0);
  loop_seconds_.push_back(0.0);
}

void ReadRecord::add_loop_bytes(uint64_t bytes) {
  if (loop_begin_.empty()) begin_loop();
  loop_bytes_.back() += bytes;
  bytes_ += bytes;
}

void ReadRecord::add_rows(const QuantWeights& w, int64_t r0, int64_t r1) {
  if (w.p0 == nullptr || r1 <= r0) return;
  const int64_t row = plane0_row_bytes(w.kind, w.k) + plane1_row_bytes(w.kind, w.k) +
                      (w.scales != nullptr ? static_cast<int64_t>(sizeof(float)) : 0);
  add_loop_bytes(static_cast<uint64_t>((r1 - r0) * row));
  rows_.push_back({w, cpu::FloatWeights::kF32, nullptr, r0, r1});
}

void ReadRecord::add_float_rows(cpu::FloatWeights kind, const void* data, int64_t k, int64_t r0, int64_t r1) {
  if (data == nullptr || r1 <= r0) return;
  add_loop_bytes(static_cast<uint64_t>((r1 - r0) * float_row_bytes(kind, k)));
  QuantWeights w;
  w.rows = r1;
  w.k = k;
  rows_.push_back({w, kind, data, r0, r1});
}

void ReadRecord::end_loop() {
  if (loop_begin_.empty()) return;
  loop_seconds_.back() = std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start_).count();
}

void ReadRecord::clear() {
  rows_.clear();
  loop_begin_.clear();
  loop_bytes_.clear();
  loop_seconds_.clear();
  bytes_ = 0;
}

std::string ReadRecord::loop_kind(size_t l) const {
  std::string kind;
  std::string_view code;
  for (size_t m = loop_begin_[l]; m < loop_end(l);) {
    const Rows& first = rows_[m];
    size_t run = 1;
    while (m + run < loop_end(l) && rows_[m + run].r1 - rows_[m + run].r0 == first.r1 - first.r0 &&
           rows_[m + run].w.k == first.w.k) {
      ++run;
    }
    if (!kind.empty()) kind += ", ";
    if (run > 1) kind += fmt::format("{} x ", run);
    kind += fmt::format("{}x{}", first.r1 - first.r0, first.w.k);
    const std::string_view name =
        first.float_data != nullptr ? float_kind_name(first.float_kind) : code_kind_name(first.w.kind);
    code = code.empty() || code == name ? name : std::string_view("mixed");
    m += run;
  }
  return kind + " " + std::string(code);
}

double ReadRecord::replay(ThreadPool& pool, Replay how, std::vector<double>* per_loop) const {
  // One token of dummy activations for the kernels, and where each loop's
  // matrices write (their own rows, so no two threads share a line).
  if (per_loop != nullptr) per_loop->assign(loop_begin_.size(), 0.0);
  int64_t k_max = 32, rows_max = 0;
  for (size_t l = 0; l < loop_begin_.size(); ++l) {
    int64_t rows = 0;
    for (size_t m = loop_begin_[l]; m < loop_end(l); ++m) {
      k_max = std::max(k_max, rows_[m].w.k);
      rows += rows_[m].w.rows + 16;
    }
    rows_max = std::max(rows_max, rows);
  }
  const std::vector<int8_t> codes(static_cast<size_t>(k_max), 1);
  const std::vector<float> acts(static_cast<size_t>(k_max), 0.01f);
  const float scale = 0.01f;
  const auto sum = static_cast<int32_t>(k_max);
  std::vector<float> y(static_cast<size_t>(rows_max));
  std::vector<int64_t> first_block, y_at;
  std::atomic<uint64_t> sink{0};
  double seconds = 0;
  for (size_t l = 0; l < loop_begin_.size(); ++l) {
    const size_t begin = loop_begin_[l], end = loop_end(l);
    // Blocks of four rows, as decode's loops claim them.
    first_block.assign(1, 0);
    y_at.assign(1, 0);
    for (size_t m = begin; m < end; ++m) {
      first_block.push_back(first_block.back() + (rows_[m].r1 - rows_[m].r0 + 3) / 4);
      y_at.push_back(y_at.back() + rows_[m].w.rows + 16);
    }
    auto run = [&](int64_t b, int64_t e) {
      uint64_t s = 0;
      size_t i = static_cast<size_t>(std::upper_bound(first_block.begin(), first_block.end(), b) - first_block.begin()) - 1;
      for (; b < e; ++i) {
        const Rows& m = rows_[begin + i];
        const int64_t stop = std::min(e, first_block[i + 1]);
        const int64_t r0 = m.r0 + 4 * (b - first_block[i]), r1 = std::min(m.r1, m.r0 + 4 * (stop - first_block[i]));
        float* out = y.data() + y_at[i];
        if (how == Replay::kKernels) {
          if (m.float_data != nullptr) {
            cpu::float_matmul(m.float_kind, m.float_data, m.w.k, acts.data(), 1, out, m.w.rows, r0, r1);
          } else {
            cpu::quant_matmul(m.w, {codes.data(), &scale, &sum, m.w.k, 1, acts.data()}, out, m.w.rows, r0, r1);
          }
        } else {
          // Each region of the rows as one read of four streams, as a
          // kernel call reads its rows.
          auto read = [&](const void* p, int64_t bytes) {
            s += cpu::stream_read(static_cast<const uint64_t*>(p), bytes / 8, 4);
          };
          if (m.float_data != nullptr) {
            const int64_t row = float_row_bytes(m.float_kind, m.w.k);
            read(static_cast<const uint8_t*>(m.float_data) + r0 * row, (r1 - r0) * row);
          } else {
            const int64_t b0 = plane0_row_bytes(m.w.kind, m.w.k), b1 = plane1_row_bytes(m.w.kind, m.w.k);
            read(m.w.p0 + r0 * b0, (r1 - r0) * b0);
            if (b1 > 0) read(m.w.p1 + r0 * b1, (r1 - r0) * b1);
            if (m.w.scales != nullptr) read(m.w.scales + r0, (r1 - r0) * static_cast<int64_t>(sizeof(float)));
          }
        }
        b = stop;
      }
      sink.fetch_add(s, std::memory_order_relaxed);
    };
    const auto t0 = std::chrono::steady_clock::now();
    pool.run(first_block.back(), run, 8, ThreadPool::Schedule::kGuided);
    const double loop = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    seconds += loop;
    if (per_loop != nullptr) (*per_loop)[l] = loop;
  }
  // The sums depend on every load: values the compiler must produce.
  asm volatile("" : : "r"(sink.load()), "r"(y.data()) : "memory");
  return seconds;
}

}  // namespace ork
