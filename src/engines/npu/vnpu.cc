#include "engines/npu/vnpu.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "kernels/cpu/quant_matmul.h"

namespace ork::npu {
namespace {

int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

int session_workers(const VnpuOptions& o) {
  if (o.workers > 0) return o.workers;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::clamp(o.profile.workers, 1, cores);
}

}  // namespace

// ---------------------------------------------------------------- params

Result<KernelParams> make_kernel_params(CodeKind kind, Datapath dp, int64_t m, int64_t k, int64_t n, int64_t vtcm_bytes,
                                        bool with_descriptors) {
  // nf4 reaches W8A8 through its 16-entry int8 table (kNf4Codes).
  const bool w8 = kind == CodeKind::kI8 || kind == CodeKind::kI8s || kind == CodeKind::kNf4;
  if ((dp == Datapath::kW8A8) != w8 || (dp == Datapath::kW4A4 && kind != CodeKind::kI4)) {
    return error(StatusCode::kUnsupported, "vnpu: W8A8 reads i8, i8s and nf4 (by its int8 table), W4A4 reads i4");
  }
  if (m < 1 || n < 1 || k < 32 || k % 32 != 0) {
    return error(StatusCode::kInvalidArgument, "vnpu: bad matmul shape m={} k={} n={}", m, k, n);
  }
  KernelParams p;
  p.datapath = dp;
  p.kind = kind;
  p.m = m;
  p.k = k;
  p.n = n;
  p.row_bytes0 = plane0_row_bytes(kind, k);
  p.row_bytes1 = plane1_row_bytes(kind, k);
  // Tokens per block: their activations take at most half of VTCM. Every
  // block streams all the weights once, so blocks are as large as fit (up
  // to 256 tokens).
  int64_t tb = std::min<int64_t>(m, 256);
  while (tb > 1 && align_up(tb * k, kLineBytes) + 2 * align_up(4 * tb, kLineBytes) > vtcm_bytes / 2) tb /= 2;
  const int64_t act_bytes = align_up(tb * k, kLineBytes) + 2 * align_up(4 * tb, kLineBytes);
  if (act_bytes > vtcm_bytes / 2) {
    return error(StatusCode::kUnsupported, "vnpu: one token's {} activations do not fit half of the {} KiB VTCM", k,
                 vtcm_bytes / 1024);
  }
  p.tokens_per_block = tb;
  // Weight and output tiles, triple-buffered (double if VTCM is tight),
  // at most 64 rows so that even small matmuls run a pipeline.
  const int64_t left = vtcm_bytes - act_bytes;
  for (int buffers : {3, 2}) {
    const int64_t per_row = p.row_bytes0 + p.row_bytes1 + 4 + 4 * tb;
    int64_t rows = std::min<int64_t>({n, 64, left / buffers / per_row});
    // Keep each buffer line-aligned: round rows down to a multiple of 32 when there is room.
    if (rows > 32) rows = rows / 32 * 32;
    while (rows >= 1 && act_bytes + buffers * (align_up(rows * (p.row_bytes0 + p.row_bytes1), kLineBytes) +
                                               align_up(4 * rows, kLineBytes) + align_up(4 * rows * tb, kLineBytes)) >
                            vtcm_bytes) {
      --rows;
    }
    if (rows >= 1) {
      p.rows_per_tile = rows;
      p.buffers = buffers;
      break;
    }
  }
  if (p.rows_per_tile < 1) {
    return error(StatusCode::kUnsupported, "vnpu: a {}-byte weight row does not fit the {} KiB VTCM twice",
                 p.row_bytes0 + p.row_bytes1, vtcm_bytes / 1024);
  }
  p.tiles = (n + p.rows_per_tile - 1) / p.rows_per_tile;
  int64_t at = 0;
  auto take = [&](int64_t bytes) {
    const int64_t off = at;
    at += align_up(bytes, kLineBytes);
    return off;
  };
  p.vtcm_act = take(tb * k);
  p.vtcm_act_scale = take(4 * tb);
  p.vtcm_act_sum = take(4 * tb);
  for (int b = 0; b < p.buffers; ++b) {
    p.vtcm_w[b] = take(p.rows_per_tile * (p.row_bytes0 + p.row_bytes1));
    p.vtcm_ws[b] = take(4 * p.rows_per_tile);
    p.vtcm_out[b] = take(4 * p.rows_per_tile * tb);
  }
  p.vtcm_bytes = at;
  p.rows_per_chunk = kLineBytes / std::gcd<int64_t>(4 * n, kLineBytes);
  p.macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (!with_descriptors) return p;
  // The descriptor lists.
  auto per_token = [&](Buffer b, int64_t bytes, int64_t vtcm) {
    DmaTemplate d;
    d.buffer = b;
    d.per_token = bytes;
    d.vtcm = vtcm;
    d.row_bytes = bytes;  // one row per token, contiguous on both sides
    d.ddr_stride = bytes;
    d.vtcm_stride = bytes;
    d.rows_are_tokens = true;
    return d;
  };
  p.act_loads = {per_token(Buffer::kActs, k, p.vtcm_act), per_token(Buffer::kActScales, 4, p.vtcm_act_scale),
                 per_token(Buffer::kActSums, 4, p.vtcm_act_sum)};
  for (int64_t i = 0; i < p.tiles; ++i) {
    const int b = static_cast<int>(i % p.buffers);
    const int64_t r0 = i * p.rows_per_tile, nr = std::min(p.rows_per_tile, n - r0);
    std::vector<DmaTemplate> loads;
    DmaTemplate d;
    d.buffer = Buffer::kW0;
    d.ddr_offset = r0 * p.row_bytes0;
    d.vtcm = p.vtcm_w[b];
    d.row_bytes = nr * p.row_bytes0;
    loads.push_back(d);
    if (p.row_bytes1 > 0) {
      d.buffer = Buffer::kW1;
      d.ddr_offset = r0 * p.row_bytes1;
      d.vtcm = p.vtcm_w[b] + nr * p.row_bytes0;
      d.row_bytes = nr * p.row_bytes1;
      loads.push_back(d);
    }
    d.buffer = Buffer::kWScales;
    d.ddr_offset = 4 * r0;
    d.vtcm = p.vtcm_ws[b];
    d.row_bytes = 4 * nr;
    loads.push_back(d);
    p.tile_loads.push_back(std::move(loads));
    // Write-back: the block's tokens x this tile's rows, 2-D.
    DmaTemplate st;
    st.buffer = Buffer::kOut;
    st.to_vtcm = false;
    st.ddr_offset = 4 * r0;
    st.per_token = 4 * n;
    st.vtcm = p.vtcm_out[b];
    st.row_bytes = 4 * nr;
    st.ddr_stride = 4 * n;
    st.vtcm_stride = 4 * nr;
    st.rows_are_tokens = true;
    p.tile_stores.push_back(st);
  }
  return p;
}

// ---------------------------------------------------------------- session

Session::Session(Vnpu* dev, int index, const VnpuOptions& o)
    : dev_(dev),
      index_(index),
      vtcm_bytes_(o.profile.vtcm_bytes),
      vtcm_(static_cast<uint8_t*>(::operator new[](static_cast<size_t>(o.profile.vtcm_bytes), std::align_val_t(kLineBytes))),
            [](uint8_t* p) { ::operator delete[](p, std::align_val_t(kLineBytes)); }),
      trace_(o.trace),
      window_(o.window_bytes > 0 ? o.window_bytes : o.profile.window_bytes, index, o.trace),
      dma_(std::make_unique<DmaQueue>(this)),
      workers_(session_workers(o) > 1 ? std::make_unique<ThreadPool>(session_workers(o)) : nullptr),
      thread_([this] { serve(); }) {}

Session::~Session() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

LineOwnership* Session::lines() const { return dev_->lines(); }

void Session::ring(std::shared_ptr<JobState> job) {
  {
    std::lock_guard lock(mu_);
    doorbell_.push_back(std::move(job));
  }
  cv_.notify_all();
}

void Session::serve() {
  for (;;) {
    std::shared_ptr<JobState> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !doorbell_.empty(); });
      if (stop_ && doorbell_.empty()) return;
      job = std::move(doorbell_.front());
      doorbell_.pop_front();
    }
    (void)run(*job);
  }
}

// One job on this session: map its buffers, meet the peers, run the
// kernel on this session's rows, drain the DMA queue, flush, meet again.
Status Session::run(JobState& js) {
  const DeviceJob& j = js.job;
  const KernelParams& p = *j.p;
  const Vnpu::Range range = dev_->partition(p, index_);
  const uint64_t maps_before = window_.stats().maps;
  const int64_t dma_before = dma_->bytes_moved();
  Status st = Status::ok();
  if (j.fail_session == index_) {
    st = error(StatusCode::kInternal, "vnpu session {}: injected failure", index_);
  } else if (range.count > 0) {
    // Prepare: weights are mapped on demand; pinned buffers are mapped already.
    const int64_t n = p.n;
    for (auto [ptr, bytes] : {std::pair<const void*, int64_t>{j.w0, n * p.row_bytes0},
                              {j.w1, n * p.row_bytes1}, {j.w_scales, 4 * n}}) {
      if (ptr == nullptr || bytes == 0) continue;
      if (auto a = window_.map(ptr, bytes, false, j.id); !a.is_ok()) {
        st = a.status();
        break;
      }
    }
  }
  Status pre;
  {
    NpuTraceScope t(trace_, TraceKind::kFence, index_, fence_seq_ + 1);
    pre = dev_->barrier(index_, ++fence_seq_, st, js);
  }
  if (st.is_ok() && !pre.is_ok()) st = pre;
  if (st.is_ok() && range.count > 0) st = matmul(j, range.start, range.count);
  {
    // Dirty output: every output byte leaves VTCM by DMA, so the flush is
    // the drain; a kernel that wrote DDR directly would clean its lines here.
    NpuTraceScope t(trace_, TraceKind::kFlush, index_, dma_->outstanding());
    Status drained = dma_->flush();
    if (st.is_ok() && !drained.is_ok()) st = drained;
    if (st.is_ok() && (dma_->pushes() != dma_->pops())) {
      st = error(StatusCode::kInternal, "vnpu session {}: {} DMA pushes but {} pops", index_, dma_->pushes(), dma_->pops());
    }
  }
  Status post;
  {
    NpuTraceScope t(trace_, TraceKind::kFence, index_, fence_seq_ + 1);
    post = dev_->barrier(index_, ++fence_seq_, st, js);
  }
  if (st.is_ok()) st = post;
  const double modeled = dev_->modeled_us(p, range.count, window_.stats().maps - maps_before, dma_->bytes_moved() - dma_before);
  dev_->finished(js, index_, st, modeled);
  return st;
}

// The W8A8 / W4A4 matmul for output rows (tokens) [row_start, row_start +
// rows): DDR -> DMA -> VTCM -> compute -> VTCM -> DMA -> DDR, `buffers`
// weight tiles in flight. Per token block: the prologue loads the block's
// activations and primes buffers-1 weight tiles; step i pops through tile
// i's load (popping earlier write-backs on the way: the queue is a strict
// FIFO), computes tile i, pushes its write-back and the load of tile
// i+buffers-1; the epilogue pops the remaining write-backs.
Status Session::matmul(const DeviceJob& j, int64_t row_start, int64_t rows) {
  const KernelParams& p = *j.p;
  const int64_t n = p.n, k = p.k, B = p.buffers;
  // Device addresses of the job's buffers: weights mapped on demand, the
  // host's staging pinned.
  DevAddr base[kBufferCount] = {};
  auto dev_addr = [&](const void* host, int64_t bytes) { return window_.map(host, bytes, false, j.id); };
  ORK_ASSIGN_OR_RETURN(base[static_cast<int>(Buffer::kW0)], dev_addr(j.w0, n * p.row_bytes0));
  if (p.row_bytes1 > 0) {
    ORK_ASSIGN_OR_RETURN(base[static_cast<int>(Buffer::kW1)], dev_addr(j.w1, n * p.row_bytes1));
  }
  ORK_ASSIGN_OR_RETURN(base[static_cast<int>(Buffer::kWScales)], dev_addr(j.w_scales, 4 * n));
  ORK_ASSIGN_OR_RETURN(base[static_cast<int>(Buffer::kActs)], window_.lookup(j.acts));
  ORK_ASSIGN_OR_RETURN(base[static_cast<int>(Buffer::kActScales)], window_.lookup(j.act_scales));
  ORK_ASSIGN_OR_RETURN(base[static_cast<int>(Buffer::kActSums)], window_.lookup(j.act_sums));
  ORK_ASSIGN_OR_RETURN(base[static_cast<int>(Buffer::kOut)], window_.lookup(j.out));
  // What each queued transfer is, in push order: the FIFO's mirror.
  enum What { kAct, kLoad, kStore };
  std::deque<std::pair<What, int64_t>> fifo;
  int64_t t0 = 0, tb = 0;  // the current token block
  auto push = [&](What what, int64_t tile, const DmaTemplate& t) {
    DmaDesc d;
    d.to_vtcm = t.to_vtcm;
    d.ddr = base[static_cast<int>(t.buffer)] + static_cast<DevAddr>(t.ddr_offset + t0 * t.per_token);
    d.vtcm = t.vtcm;
    d.rows = t.rows_are_tokens ? tb : t.rows;
    d.row_bytes = t.row_bytes;
    d.ddr_stride = t.ddr_stride;
    d.vtcm_stride = t.vtcm_stride;
    dma_->push(d);
    fifo.emplace_back(what, tile);
  };
  // Pops in order up to and including the last transfer of (what, tile).
  auto pop_through = [&](What what, int64_t tile) -> Status {
    while (std::any_of(fifo.begin(), fifo.end(), [&](const auto& e) { return e.first == what && e.second == tile; })) {
      const int64_t t = fifo.front().second;
      fifo.pop_front();
      ORK_RETURN_IF_ERROR(dma_->pop(t));
    }
    return Status::ok();
  };
  auto load = [&](int64_t i) {
    for (const DmaTemplate& t : p.tile_loads[static_cast<size_t>(i)]) push(kLoad, i, t);
  };
  for (t0 = row_start; t0 < row_start + rows; t0 += p.tokens_per_block) {
    tb = std::min(p.tokens_per_block, row_start + rows - t0);
    // Prologue: the block's activations, then the first tiles.
    for (const DmaTemplate& t : p.act_loads) push(kAct, -1, t);
    for (int64_t i = 0; i < std::min<int64_t>(B - 1, p.tiles); ++i) load(i);
    ORK_RETURN_IF_ERROR(pop_through(kAct, -1));
    const QuantActs qa{reinterpret_cast<const int8_t*>(vtcm_.get() + p.vtcm_act),
                       reinterpret_cast<const float*>(vtcm_.get() + p.vtcm_act_scale),
                       reinterpret_cast<const int32_t*>(vtcm_.get() + p.vtcm_act_sum), k, static_cast<int>(tb)};
    for (int64_t i = 0; i < p.tiles; ++i) {
      ORK_RETURN_IF_ERROR(pop_through(kLoad, i));
      const int64_t b = i % B, nr = std::min(p.rows_per_tile, n - i * p.rows_per_tile);
      {
        NpuTraceScope t(trace_, TraceKind::kCompute, index_, i);
        QuantWeights qw;
        qw.kind = p.kind;
        qw.p0 = vtcm_.get() + p.vtcm_w[b];
        qw.p1 = p.row_bytes1 > 0 ? qw.p0 + nr * p.row_bytes0 : nullptr;
        qw.scales = reinterpret_cast<const float*>(vtcm_.get() + p.vtcm_ws[b]);
        qw.scale_mul = j.scale_mul;
        qw.rows = nr;
        qw.k = k;
        auto* y = reinterpret_cast<float*>(vtcm_.get() + p.vtcm_out[b]);
        if (workers_) {
          workers_->run(nr, [&](int64_t r0, int64_t r1) { cpu::quant_matmul(qw, qa, y, nr, r0, r1); });
        } else {
          cpu::quant_matmul(qw, qa, y, nr, 0, nr);
        }
      }
      push(kStore, i, p.tile_stores[static_cast<size_t>(i)]);
      if (i + B - 1 < p.tiles) load(i + B - 1);
    }
    // Epilogue: drain the write-backs.
    ORK_RETURN_IF_ERROR(pop_through(kStore, p.tiles - 1));
  }
  if (!fifo.empty()) return error(StatusCode::kInternal, "vnpu session {}: {} DMA transfers left unpopped", index_, fifo.size());
  return Status::ok();
}

// ---------------------------------------------------------------- device

Vnpu::Vnpu(const VnpuOptions& o) : o_(o) {}

Vnpu::~Vnpu() { sessions_.clear(); }

Result<std::unique_ptr<Vnpu>> Vnpu::create(const VnpuOptions& o) {
  if (o.sessions < 1 || o.sessions > 16) return error(StatusCode::kInvalidArgument, "vnpu: sessions must be 1..16, not {}", o.sessions);
  if (o.workers < 0) return error(StatusCode::kInvalidArgument, "vnpu: workers must be >= 0");
  std::unique_ptr<Vnpu> v(new Vnpu(o));
  v->slots_ = std::make_unique<FenceSlot[]>(static_cast<size_t>(o.sessions));
  for (int i = 0; i < o.sessions; ++i) v->sessions_.push_back(std::make_unique<Session>(v.get(), i, o));
  return v;
}

Status Vnpu::pin(const void* host, int64_t bytes) {
  for (auto& s : sessions_) {
    ORK_RETURN_IF_ERROR(s->window().map(host, bytes, true, 0).status());
  }
  return Status::ok();
}

void Vnpu::unpin(const void* host) {
  for (auto& s : sessions_) s->window().unmap(host);
}

Vnpu::Range Vnpu::partition(const KernelParams& p, int idx) const {
  const int count = sessions();
  const int64_t total = p.m;  // flattened output rows (ne1 * ne2 * ne3): tokens
  Range all{0, idx == 0 ? total : 0};
  if (count == 1 || p.rows_per_chunk == 0) return all;
  const int64_t chunks = (total + p.rows_per_chunk - 1) / p.rows_per_chunk;
  if (chunks < count) return all;  // too few aligned chunks: device 0 alone
  const int64_t per = chunks / count;
  Range r;
  r.start = idx * per * p.rows_per_chunk;
  r.count = idx == count - 1 ? total - r.start : per * p.rows_per_chunk;
  return r;
}

Status Vnpu::barrier(int idx, uint32_t seq, const Status& mine, JobState& js) {
  {
    std::lock_guard lock(js.status_mu);  // peers read it once they see this arrival
    js.status[static_cast<size_t>(idx)] = mine;
  }
  const uint32_t code = mine.is_ok() ? 0u : static_cast<uint32_t>(mine.code());
  slots_[static_cast<size_t>(idx)].word.store((static_cast<uint64_t>(seq) << 32) | code, std::memory_order_release);
  for (int spins = 0;; ++spins) {
    bool all = true;
    for (int p = 0; p < sessions(); ++p) {
      const uint64_t w = slots_[static_cast<size_t>(p)].word.load(std::memory_order_acquire);
      const auto peer_seq = static_cast<uint32_t>(w >> 32);
      const auto peer_code = static_cast<uint32_t>(w);
      if (static_cast<int32_t>(peer_seq - seq) < 0) {
        all = false;
        continue;
      }
      // An error at this barrier unblocks everyone at once.
      if (peer_seq == seq && peer_code != 0 && p != idx) {
        std::lock_guard lock(js.status_mu);
        return js.status[static_cast<size_t>(p)];
      }
    }
    if (all) break;
    if (spins > 64) std::this_thread::yield();
  }
  return mine;
}

double Vnpu::modeled_us(const KernelParams& p, int64_t rows, uint64_t new_maps, int64_t dma_bytes) const {
  const DeviceProfile& d = o_.profile;
  const double tops = p.datapath == Datapath::kW4A4 && d.int4_tops > 0 ? d.int4_tops : d.int8_tops;
  const double share = tops / std::max(d.cores, sessions());
  const double compute_us = 2.0 * static_cast<double>(rows) * static_cast<double>(p.n) * static_cast<double>(p.k) / (share * 1e6);
  const double submit = o_.doorbell ? d.submit_doorbell_us : d.submit_blocking_us;
  // Sessions share the DRAM bandwidth.
  const double dma_us = static_cast<double>(dma_bytes) / (d.dma_gbps * 1e3 / sessions());
  // A device that takes only int8 matrices gets i8s and nf4 weights as an
  // int8 tile the host writes first: a byte per weight, before the job.
  const bool tiled = d.host_int8_tiles && (p.kind == CodeKind::kI8s || p.kind == CodeKind::kNf4) && rows > 0;
  const double tile_us = tiled ? static_cast<double>(p.n) * static_cast<double>(p.k) / (d.dma_gbps * 1e3) : 0.0;
  return submit + tile_us + static_cast<double>(new_maps) * d.map_us + std::max(compute_us, dma_us);
}

int64_t dma_bytes(const KernelParams& p, int64_t rows) {
  if (rows <= 0) return 0;
  // Every token block streams all the weights (planes and scales) once,
  // and moves its activations in and its outputs out.
  const int64_t blocks = (rows + p.tokens_per_block - 1) / p.tokens_per_block;
  const int64_t weights = p.n * (p.row_bytes0 + p.row_bytes1 + 4);
  return blocks * weights + rows * (p.k + 8) + rows * p.n * 4;
}

double Vnpu::predict_us(const KernelParams& p) const {
  // Steady state: the weights are mapped already; session 0 has the most rows.
  return modeled_us(p, partition(p, 0).count, 0, dma_bytes(p, partition(p, 0).count));
}

std::shared_ptr<JobState> Vnpu::submit(const DeviceJob& job, std::shared_ptr<JobState> reuse) {
  // A finished job's state that nothing else holds (no fence, no session)
  // is made over rather than allocated again: a decode step submits dozens.
  std::shared_ptr<JobState> js = reuse != nullptr && reuse.use_count() == 1 ? std::move(reuse) : std::make_shared<JobState>();
  js->deadline_us = 0;
  js->job = job;
  js->job.id = ++next_id_;
  if (!o_.compute) {
    // Timing only: no session thread runs (on this machine they would take
    // the cores the host is measured on). The job is a point on the
    // device's own clock: queued behind the last, mapped on first use,
    // done at its modeled time.
    js->remaining = 0;
    const auto n = static_cast<size_t>(sessions());
    const Status observed = job.fail_session >= 0
                                ? error(StatusCode::kInternal, "vnpu session {}: injected failure", job.fail_session)
                                : Status::ok();
    js->status.resize(n);
    js->observed.resize(n);
    for (size_t i = 0; i < n; ++i) {
      js->status[i] = Status::ok();
      js->observed[i] = observed;
    }
    const KernelParams& p = *job.p;
    const uint64_t new_maps = timing_mapped_.insert(job.w0).second ? 1 : 0;
    const double device = modeled_us(p, partition(p, 0).count, new_maps, dma_bytes(p, partition(p, 0).count));
    js->submit_us = clock_us();
    timing_free_us_ = std::max(timing_free_us_, js->submit_us) + device;
    js->deadline_us = timing_free_us_;
    last_deadline_us_.store(timing_free_us_, std::memory_order_relaxed);
    js->modeled_us.assign(n, device);
    std::lock_guard t(totals_mu_);
    ++totals_.jobs;
    totals_.modeled_us += device;
    return js;
  }
  js->remaining = sessions();
  js->status.assign(static_cast<size_t>(sessions()), Status::ok());
  js->observed.assign(static_cast<size_t>(sessions()), Status::ok());
  js->modeled_us.assign(static_cast<size_t>(sessions()), 0.0);
  js->submit_us = clock_us();
  running_.fetch_add(1, std::memory_order_relaxed);
  if (o_.check_lines) lines_.reset();
  {
    NpuTraceScope t(o_.trace, TraceKind::kSubmit, -1, static_cast<int64_t>(js->job.id));
    for (auto& s : sessions_) s->ring(js);
  }
  return js;
}

void Vnpu::finished(JobState& js, int idx, Status s, double modeled) {
  js.observed[static_cast<size_t>(idx)] = std::move(s);
  js.modeled_us[static_cast<size_t>(idx)] = modeled;
  std::lock_guard lock(js.mu);
  // The last session sets the job's end before it counts itself out: a
  // waiter that sees nothing remaining (without the lock) sees the end too.
  if (js.remaining.load() == 1) {
    const double device = *std::max_element(js.modeled_us.begin(), js.modeled_us.end());
    js.deadline_us = js.submit_us + device;
    std::lock_guard t(totals_mu_);
    ++totals_.jobs;
    totals_.modeled_us += device;
    if (js.deadline_us > last_deadline_us_.load(std::memory_order_relaxed)) {
      last_deadline_us_.store(js.deadline_us, std::memory_order_relaxed);
    }
  }
  if (--js.remaining == 0) {
    running_.fetch_sub(1, std::memory_order_release);
    js.cv.notify_all();
  }
}

double Vnpu::clock_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
}

bool Vnpu::done(const JobState& js) const {
  if (js.remaining.load() != 0) return false;
  return !(o_.paced || !o_.compute) || clock_us() >= js.deadline_us;
}

bool Vnpu::idle() const {
  if (running_.load(std::memory_order_acquire) != 0) return false;
  return !(o_.paced || !o_.compute) || clock_us() >= last_deadline_us_.load(std::memory_order_relaxed);
}

Status Vnpu::wait(JobState& js) {
  if (js.remaining.load() != 0) {
    std::unique_lock lock(js.mu);
    js.cv.wait(lock, [&] { return js.remaining.load() == 0; });
  }
  if (o_.paced || !o_.compute) {
    const double left = js.deadline_us - clock_us();
    if (left > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(left));
  }
  for (const Status& s : js.observed) {
    if (!s.is_ok()) return s;
  }
  return Status::ok();
}

Vnpu::Totals Vnpu::totals() const {
  std::lock_guard lock(totals_mu_);
  return totals_;
}

}  // namespace ork::npu
