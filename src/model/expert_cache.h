// The expert cache (DESIGN section 6, issue 20): a Mixture-of-Experts model
// larger than memory keeps everything but its routed experts resident and
// reads the experts from the orkpack on demand, one layer's expert (its
// gate, up and down, in the file's own bytes) per slot, within a byte
// budget.
//
// A layer asks for its routed experts as soon as its router has chosen
// (request); misses are read by a few I/O threads with large direct reads
// (DirectReader: past the page cache) while the caller goes on, and the
// caller then waits for them (wait) and releases them when the layer is
// done. prefetch() reads a prediction of a later layer's experts on the
// same threads behind any demand read; it never evicts what is pinned.
// Which resident expert gives way to a miss is the policy's choice. The
// router's choices are never changed to suit the cache: the output is
// bit-identical to the fully resident model's.
//
// Thread-safe: any thread may call any method; a slot stays put while
// pinned.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/direct_reader.h"
#include "core/mapped_file.h"
#include "format/orkpack/orkpack.h"
#include "ork/status.h"
#include "quant/weight_view.h"

namespace ork {

class Trace;

enum class ExpertPolicy {
  kLru,  // least recently used gives way
  kLfu,  // least often used so far (over the whole run, every layer counted alike) gives way; ties by recency
};
const char* expert_policy_name(ExpertPolicy p);

struct ExpertCacheOptions {
  uint64_t bytes = 0;  // the slots' memory; at least min_slots() slots must fit
  ExpertPolicy policy = ExpertPolicy::kLru;
  // Reads in flight at once. A virtual disk here read 0.6 GB/s with 2,
  // 1.4 with 4 and 1.7 with 8 or 16 (docs/BENCHMARKS.md section 11); the
  // threads sleep in the kernel while their reads are in flight.
  int io_threads = 8;
};

struct ExpertCacheStats {
  uint64_t slots = 0, slot_bytes = 0;
  uint64_t requests = 0;         // experts asked for by a layer
  uint64_t hits = 0;             // ... found resident (or already on their way from a prefetch)
  uint64_t prefetches = 0;       // prefetch reads started
  uint64_t prefetch_used = 0;    // ... whose expert a layer then asked for before it was evicted
  uint64_t bytes_read = 0;       // from the file
  uint64_t reads = 0;            // read calls
  double read_seconds = 0;       // summed over the I/O threads: time inside reads
  double busy_seconds = 0;       // wall time with at least one read in flight (the disk's rate: bytes_read / it)
  double stall_seconds = 0;      // wall time with a caller waiting on reads
  bool direct = false;           // O_DIRECT in use
  double hit_rate() const { return requests == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(requests); }
};

class ExpertCache {
 public:
  // One expert of one layer: its three matrices (gate, up, down) as views
  // with no data (the geometry), and where each one's planes and scales
  // lie in the file.
  struct Range {
    uint64_t offset = 0, bytes = 0;
  };
  struct Matrix {
    WeightView view;  // data and scales null
    Range data, scales;
    // Its directory entry, whose values are checked as they arrive (a file
    // opened with its experts' checks left to the reader); null: none.
    const OrkpackTensor* entry = nullptr;
  };
  struct Expert {
    Matrix m[3];
  };

  // `experts` is [layer * n_expert + expert]. Fails when the budget holds
  // fewer than min_slots(k) slots, naming the numbers.
  static Result<std::unique_ptr<ExpertCache>> create(const std::string& path, std::vector<Expert> experts, int n_layer,
                                                     int n_expert, int n_expert_used, const ExpertCacheOptions& o);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  // Slots the cache needs at least: a layer's k experts and the next
  // layer's k predicted ones.
  static int min_slots(int n_expert_used) { return 2 * n_expert_used; }
  // Bytes of one slot for these experts (each range widened to the direct
  // read's alignment).
  static uint64_t slot_bytes_for(std::span<const Expert> experts);

  // Starts reading whichever of `layer`'s experts `ids` (distinct) are not
  // resident and pins all of them. At most capacity() - pinned() at once.
  Status request(int layer, std::span<const int32_t> ids);
  // Waits until they are in (a read error surfaces here) and sets their
  // views in gate/up/down[id] (vectors of n_expert).
  Status wait(int layer, std::span<const int32_t> ids, std::vector<WeightView>& gate, std::vector<WeightView>& up,
              std::vector<WeightView>& down);
  // The same views at once, whether the bytes are in yet or not (the slots
  // are fixed at request): for a caller that awaits each expert before it
  // reads it (present, await_one).
  Status lend(int layer, std::span<const int32_t> ids, std::vector<WeightView>& gate, std::vector<WeightView>& up,
              std::vector<WeightView>& down);
  // Whether a requested expert's bytes are in (or its read failed).
  bool present(int layer, int32_t id) const;
  // Waits until they are; a read error surfaces here.
  Status await_one(int layer, int32_t id);
  // Unpins them.
  void release(int layer, std::span<const int32_t> ids);
  // Starts reading a predicted set of a later layer's experts into slots
  // nobody pins, behind every demand read; does not wait, never evicts a
  // pinned slot or one in use since the last request of another layer.
  void prefetch(int layer, std::span<const int32_t> ids);

  int capacity() const { return static_cast<int>(slots_.size()); }
  ExpertCacheStats stats() const;
  void set_trace(Trace* trace);

 private:
  enum class State { kEmpty, kLoading, kReady, kFailed };
  struct Slot {
    int key = -1;  // layer * n_expert + expert
    State state = State::kEmpty;
    int pins = 0;
    int reads_left = 0;
    uint64_t last_use = 0;
    bool prefetched = false;  // read by a prefetch, not yet asked for
    Status error;
    uint8_t* mem = nullptr;
  };
  struct Task {
    int slot;
    int matrix;
  };
  // Where one matrix of an expert lies in its slot and what is read for it:
  // one read when its scales follow its planes within a block (the orkpack
  // writer's order), else two. Made once per expert, at create.
  struct Placement {
    uint64_t at = 0;    // from the slot's start
    uint64_t size = 0;  // bytes of the slot it takes
    int n_reads = 0;
    Range read[2];              // file ranges
    uint64_t read_at[2] = {};   // where each lands (from `at`)
    uint64_t data_at = 0, scales_at = 0;  // where the planes and scales start (from `at`)
    // Where the f32 scales are: scales_at, or after the reads where the
    // file's f16 scales are widened to.
    uint64_t f32_scales_at = 0;
    bool widen = false;
  };
  static Placement place(const Matrix& m);
  static Placement place_reads(const Matrix& m);  // the reads alone
  ExpertCache() = default;
  // A slot for `key`, evicting by policy among unpinned, settled slots (a
  // prefetch only among those not used since the current step); -1 if none.
  int victim(bool for_prefetch) const;
  void start_read(int slot, int key, bool front);
  void io_loop(int index);
  // Where matrix i of a slot's expert lies in its memory: data and scales.
  WeightView view_of(const Slot& s, int i) const;

  DirectReader file_;
  std::vector<Expert> experts_;
  std::vector<std::array<Placement, 3>> placements_;  // [key]
  int n_expert_ = 0, n_expert_used_ = 0;
  ExpertPolicy policy_ = ExpertPolicy::kLru;
  uint64_t slot_bytes_ = 0;
  HugePages arena_;
  size_t arena_bytes_ = 0;
  std::vector<Slot> slots_;
  std::vector<int> slot_of_;       // [key]: the slot holding it, or -1
  std::vector<uint64_t> uses_;     // [key]: times a layer asked for it (LFU)

  mutable std::mutex mu_;
  std::condition_variable ready_cv_, work_cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  uint64_t tick_ = 0, step_start_ = 0;
  int reading_ = 0;  // reads in flight, and since when one was
  std::chrono::steady_clock::time_point busy_since_;
  int waiting_ = 0;  // callers waiting on reads, and since when one was
  std::chrono::steady_clock::time_point stall_since_;
  int last_layer_ = -1;
  ExpertCacheStats stats_;
  Trace* trace_ = nullptr;
  std::vector<int> trace_tracks_;  // per I/O thread
  std::vector<std::thread> io_;
};

}  // namespace ork
