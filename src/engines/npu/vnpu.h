// vnpu: a virtual NPU that follows a Hexagon-HTP-like execution model and
// computes real results (DESIGN section 4). It stands in for the device
// side of the NPU engine on machines without an NPU, and is the reference
// every real NPU back end will be tested against.
//
// A Vnpu has one or more sessions (devices). Each session owns:
//   - a VTCM scratchpad of fixed size; kernels compute only on VTCM data;
//   - a DMA engine with a strict FIFO queue (push, pop, flush; 1-D and 2-D
//     descriptors) whose transfers run on their own thread, asynchronously
//     to compute;
//   - a device address window: DDR buffers are reachable by DMA only once
//     mapped into it; weights are mapped on demand and unmapped least
//     recently used first, pinned buffers (activations, outputs, KV cache)
//     stay mapped;
//   - a doorbell submission queue served by the session's thread, and
//     worker threads that split a tile's compute;
//   - a 128-byte fence slot shared with its peers.
// The datapath is fixed: W8A8 and W4A4 integer matmuls with a per-row
// weight scale and a per-token activation scale (KernelParams).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/thread_pool.h"
#include "engines/npu/profile.h"
#include "engines/npu/trace_kinds.h"
#include "kernels/quant_types.h"
#include "ork/status.h"

namespace ork::npu {

using DevAddr = uint64_t;
constexpr int64_t kLineBytes = 128;  // the device's cache line: the unit of multi-device ownership

// The address window of one session.
class AddressWindow {
 public:
  AddressWindow(int64_t bytes, int session, Trace* trace) : bytes_(bytes), session_(session), trace_(trace) {}

  // The device address of [host, host + bytes), mapping it if needed
  // (evicting unpinned mappings not used by job `job`, least recently used
  // first). A buffer is identified by its host address and size.
  Result<DevAddr> map(const void* host, int64_t bytes, bool pinned, uint64_t job);
  // The host bytes behind a device range, or an error if it is not mapped.
  Result<uint8_t*> translate(DevAddr addr, int64_t bytes) const;
  // Unmaps a buffer (pinned ones too: their owner is going away).
  void unmap(const void* host);

  bool is_mapped(const void* host) const;
  // The device address of a buffer already mapped (pinned ones), by host address.
  Result<DevAddr> lookup(const void* host) const;

  struct Stats {
    uint64_t maps = 0, unmaps = 0, evictions = 0;  // evictions: unmaps to make room (never pinned)
    int64_t mapped_bytes = 0, pinned_bytes = 0, peak_bytes = 0;
  };
  Stats stats() const;
  int64_t size() const { return bytes_; }

 private:
  struct Mapping {
    uint8_t* host;
    int64_t bytes;
    bool pinned;
    uint64_t last_job;
    uint64_t last_use;
  };
  std::optional<DevAddr> find_gap(int64_t bytes) const;
  void unmap_locked(DevAddr addr);

  const int64_t bytes_;
  const int session_;
  Trace* trace_;
  mutable std::mutex mu_;
  std::map<DevAddr, Mapping> by_addr_;
  std::unordered_map<const void*, DevAddr> by_host_;
  uint64_t clock_ = 0;
  Stats stats_;
};

// Records which session wrote each 128-byte DDR line of a job (test
// instrumentation): two sessions writing one line is a violation.
class LineOwnership {
 public:
  void reset();
  void record(int session, const uint8_t* begin, int64_t bytes);
  uint64_t conflicts() const { return conflicts_.load(); }

 private:
  std::mutex mu_;
  std::unordered_map<uintptr_t, int> owner_;
  std::atomic<uint64_t> conflicts_{0};
};

// One DMA transfer: rows x row_bytes between DDR (device address, row
// stride ddr_stride) and VTCM (offset, row stride vtcm_stride). A 1-D
// transfer is one row.
struct DmaDesc {
  bool to_vtcm = true;
  DevAddr ddr = 0;
  int64_t vtcm = 0;
  int64_t rows = 1, row_bytes = 0, ddr_stride = 0, vtcm_stride = 0;
};

class Session;

// The strict-FIFO DMA queue of a session, served by its own thread.
class DmaQueue {
 public:
  explicit DmaQueue(Session* s);
  ~DmaQueue();
  DmaQueue(const DmaQueue&) = delete;
  DmaQueue& operator=(const DmaQueue&) = delete;

  // Queues a transfer; returns at once.
  void push(const DmaDesc& d);
  // Waits for the oldest queued transfer and removes it; its status.
  Status pop(int64_t progress);
  // Waits for and removes every queued transfer (for batches pushed without
  // individual pops; the kernels here always pop).
  Status flush();
  int64_t outstanding() const;
  uint64_t pushes() const { return pushes_; }
  uint64_t pops() const { return pops_; }
  int64_t bytes_moved() const { return bytes_; }

 private:
  void serve();
  Status execute(const DmaDesc& d);

  Session* s_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Entry {
    DmaDesc d;
    bool done = false;
    Status status;
  };
  std::deque<Entry> queue_;  // pushed, not yet popped; the served prefix is done
  size_t next_ = 0;          // index of the next entry to execute
  bool stop_ = false;
  uint64_t pushes_ = 0, pops_ = 0;
  int64_t bytes_ = 0;
  std::thread thread_;
};

// The two datapaths.
enum class Datapath { kW8A8, kW4A4 };

// The DDR buffers of a matmul job, which descriptor templates refer to.
enum class Buffer { kW0, kW1, kWScales, kActs, kActScales, kActSums, kOut };
constexpr int kBufferCount = 7;
static_assert(static_cast<int>(Buffer::kOut) + 1 == kBufferCount, "a job's buffer table has one entry per Buffer");

// A DMA descriptor built on the host: which buffer, offsets and sizes. The
// kernel adds the buffer's device address and, for per-token transfers,
// the token block's offset (`per_token` bytes per token of the block's
// first token; for write-backs and activation loads the row count is the
// block's token count).
struct DmaTemplate {
  Buffer buffer = Buffer::kW0;
  bool to_vtcm = true;
  int64_t ddr_offset = 0, per_token = 0;
  int64_t vtcm = 0;
  int64_t rows = 1, row_bytes = 0, ddr_stride = 0, vtcm_stride = 0;
  bool rows_are_tokens = false;
};

// The host-built record a kernel runs from (the program cache holds one per
// (op, shape, tier)). The kernel reads these fields and nothing else.
struct KernelParams {
  Datapath datapath = Datapath::kW8A8;
  CodeKind kind = CodeKind::kI8;
  int64_t m = 0, k = 0, n = 0;
  int64_t row_bytes0 = 0, row_bytes1 = 0;  // weight plane bytes per row
  int64_t rows_per_tile = 0, tiles = 0;
  int64_t tokens_per_block = 0;
  int buffers = 0;  // weight and output tiles in flight (2..16)
  // VTCM layout (byte offsets).
  int64_t vtcm_act = 0, vtcm_act_scale = 0, vtcm_act_sum = 0;
  int64_t vtcm_w[16] = {}, vtcm_ws[16] = {}, vtcm_out[16] = {};
  int64_t vtcm_bytes = 0;
  // The DMA descriptor lists: a token block's activation loads, and per
  // weight tile its loads and its write-back.
  std::vector<DmaTemplate> act_loads;
  std::vector<std::vector<DmaTemplate>> tile_loads;
  std::vector<DmaTemplate> tile_stores;
  // Multi-device split of the flattened output rows (tokens).
  // Output rows are n floats: chunks of whole rows whose bytes are a
  // multiple of the 128-byte line. 0: cannot be split; device 0 does all.
  int64_t rows_per_chunk = 0;
  double macs = 0;
};

// The bytes a job's kernel moves for `rows` output rows (tokens).
int64_t dma_bytes(const KernelParams& p, int64_t rows);

// Builds the params for an op on a profile's VTCM, or says why it cannot.
// Without descriptors: the tiling and layout only (enough to decide whether
// the op fits), without the per-tile DMA lists.
Result<KernelParams> make_kernel_params(CodeKind kind, Datapath dp, int64_t m, int64_t k, int64_t n, int64_t vtcm_bytes,
                                        bool with_descriptors = true);

// One job as the device sees it: params and DDR buffers.
struct DeviceJob {
  const KernelParams* p = nullptr;
  const uint8_t* w0 = nullptr;  // weight planes and per-row scales
  const uint8_t* w1 = nullptr;
  const float* w_scales = nullptr;
  float scale_mul = 1.0f;
  const int8_t* acts = nullptr;  // m x k, pinned
  const float* act_scales = nullptr;
  const int32_t* act_sums = nullptr;
  float* out = nullptr;  // m x n, pinned, 128-byte aligned
  uint64_t id = 0;
  int fail_session = -1;  // test hook: this session reports an error
};

struct VnpuOptions {
  DeviceProfile profile;
  int sessions = 1;
  int64_t window_bytes = 0;  // 0: the profile's
  int workers = 0;           // host threads per session computing tiles (0: the profile's, at most the host's cores)
  bool paced = false;        // fences wait for the modeled device time
  bool doorbell = true;      // modeled submit latency: doorbell or blocking
  bool check_lines = false;  // record 128-byte line ownership of DDR writes
  // False: timing only - no session thread runs; each job is queued on the
  // device's modeled clock (mapped on first use) and its fence signals at
  // its modeled time, with the output left as it was. On a machine whose
  // cores the device would share, the host side of its use can so be
  // measured alone. Results are not valid.
  bool compute = true;
  Trace* trace = nullptr;
};

class Vnpu;

class Session {
 public:
  Session(Vnpu* dev, int index, const VnpuOptions& o);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int index() const { return index_; }
  AddressWindow& window() { return window_; }
  const DmaQueue& dma() const { return *dma_; }
  uint8_t* vtcm() { return vtcm_.get(); }
  int64_t vtcm_bytes() const { return vtcm_bytes_; }
  Trace* trace() const { return trace_; }
  LineOwnership* lines() const;

  // Rings the doorbell: the session's thread will run the job.
  void ring(std::shared_ptr<struct JobState> job);

 private:
  void serve();
  Status run(JobState& job);
  Status matmul(const DeviceJob& j, int64_t row_start, int64_t rows);

  Vnpu* dev_;
  const int index_;
  int64_t vtcm_bytes_;
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> vtcm_;
  Trace* trace_;
  AddressWindow window_;
  std::unique_ptr<DmaQueue> dma_;
  std::unique_ptr<ThreadPool> workers_;
  uint32_t fence_seq_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<JobState>> doorbell_;
  bool stop_ = false;
  std::thread thread_;
};

// A submitted job's shared state; the Fence the host waits on.
struct JobState {
  DeviceJob job;
  std::atomic<int> remaining{0};
  std::vector<Status> status;         // per session: its own result, published at each barrier
  std::vector<Status> observed;       // per session: what it returned, peers' errors included
  std::vector<double> modeled_us;     // per session
  double submit_us = 0;               // host time of submission (trace clock)
  double deadline_us = 0;             // paced: not done before this
  std::mutex mu, status_mu;
  std::condition_variable cv;
};

class Vnpu {
 public:
  static Result<std::unique_ptr<Vnpu>> create(const VnpuOptions& o);
  ~Vnpu();

  const VnpuOptions& options() const { return o_; }
  int sessions() const { return static_cast<int>(sessions_.size()); }
  Session& session(int i) { return *sessions_[static_cast<size_t>(i)]; }

  // Maps a pinned buffer in every session's window (activations, outputs,
  // the KV cache); never evicted.
  Status pin(const void* host, int64_t bytes);
  void unpin(const void* host);

  // Submits a job to every session (doorbell); returns its fence. `reuse`:
  // a finished job's state, made over for this one if nothing else holds it.
  std::shared_ptr<JobState> submit(const DeviceJob& job, std::shared_ptr<JobState> reuse = nullptr);
  // Blocks until the job is done (and, paced, its modeled time has passed).
  Status wait(JobState& job);
  bool done(const JobState& job) const;
  // Nothing submitted is still running, nor (paced or timing only) before
  // its modeled end: one atomic and at most one clock read, where asking
  // each job would touch its state - cold by then, after a matmul's worth
  // of weights has streamed through the caches.
  bool idle() const;

  // The range of flattened output rows session `idx` computes.
  struct Range {
    int64_t start = 0, count = 0;
  };
  Range partition(const KernelParams& p, int idx) const;

  // Cross-session barrier on the fence slots: every session arrives with
  // its status; returns the first error any session reported.
  Status barrier(int idx, uint32_t seq, const Status& mine, JobState& job);

  // A session's modeled time for `rows` output rows: submission, new
  // mappings, and compute overlapped with its DMA traffic.
  double modeled_us(const KernelParams& p, int64_t rows, uint64_t new_maps, int64_t dma_bytes) const;
  // A job's modeled time before it runs (its weights mapped already).
  double predict_us(const KernelParams& p) const;
  double clock_us() const;
  LineOwnership* lines() { return o_.check_lines ? &lines_ : nullptr; }
  Trace* trace() const { return o_.trace; }

  struct Totals {
    uint64_t jobs = 0;
    double modeled_us = 0;  // sum over jobs of the slowest session's modeled time
  };
  Totals totals() const;

 private:
  explicit Vnpu(const VnpuOptions& o);
  friend class Session;
  void finished(JobState& job, int idx, Status s, double modeled);

  VnpuOptions o_;
  std::vector<std::unique_ptr<Session>> sessions_;
  // One 128-byte line per session: (sequence << 32) | status code.
  struct alignas(kLineBytes) FenceSlot {
    std::atomic<uint64_t> word{0};
  };
  std::unique_ptr<FenceSlot[]> slots_;
  LineOwnership lines_;
  mutable std::mutex totals_mu_;
  Totals totals_;
  uint64_t next_id_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  // Timing only: when the device is next free, and the weights it has mapped.
  double timing_free_us_ = 0;
  std::unordered_set<const void*> timing_mapped_;
  // For idle(): jobs not yet finished by every session, and the latest
  // modeled end of any job (paced and timing only).
  std::atomic<int> running_{0};
  std::atomic<double> last_deadline_us_{0};
};

}  // namespace ork::npu
