#include "model/expert_cache.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/trace.h"

namespace ork {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const char* expert_policy_name(ExpertPolicy p) { return p == ExpertPolicy::kLfu ? "lfu" : "lru"; }

ExpertCache::Placement ExpertCache::place(const Matrix& m) {
  Placement l = place_reads(m);
  l.f32_scales_at = l.scales_at;
  l.widen = m.scales.bytes != 0 && m.scales.bytes == 2 * static_cast<uint64_t>(m.view.rows);
  if (l.widen) {
    l.f32_scales_at = (l.size + 63) / 64 * 64;
    l.size = (l.f32_scales_at + 4 * static_cast<uint64_t>(m.view.rows) + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  }
  return l;
}

ExpertCache::Placement ExpertCache::place_reads(const Matrix& m) {
  Placement l;
  const uint64_t data_end = m.data.offset + m.data.bytes;
  const bool merged = m.scales.bytes == 0 || (m.scales.offset >= data_end && m.scales.offset - data_end < kDirectAlign);
  const uint64_t a = DirectReader::aligned_start(m.data.offset);
  l.data_at = m.data.offset - a;
  if (merged) {
    const uint64_t end = m.scales.bytes == 0 ? data_end : m.scales.offset + m.scales.bytes;
    l.n_reads = 1;
    l.read[0] = {m.data.offset, end - m.data.offset};
    l.size = DirectReader::aligned_span(m.data.offset, end - m.data.offset);
    l.scales_at = m.scales.bytes == 0 ? 0 : m.scales.offset - a;
    return l;
  }
  const uint64_t data_span = DirectReader::aligned_span(m.data.offset, m.data.bytes);
  l.n_reads = 2;
  l.read[0] = {m.data.offset, m.data.bytes};
  l.read[1] = {m.scales.offset, m.scales.bytes};
  l.read_at[1] = data_span;
  l.size = data_span + DirectReader::aligned_span(m.scales.offset, m.scales.bytes);
  l.scales_at = data_span + (m.scales.offset - DirectReader::aligned_start(m.scales.offset));
  return l;
}

uint64_t ExpertCache::slot_bytes_for(std::span<const Expert> experts) {
  uint64_t most = 0;
  for (const Expert& e : experts) {
    uint64_t bytes = 0;
    for (const Matrix& m : e.m) bytes += place(m).size;
    most = std::max(most, bytes);
  }
  return most;
}

Result<std::unique_ptr<ExpertCache>> ExpertCache::create(const std::string& path, std::vector<Expert> experts,
                                                         int n_layer, int n_expert, int n_expert_used,
                                                         const ExpertCacheOptions& o) {
  if (experts.size() != static_cast<size_t>(n_layer) * static_cast<size_t>(n_expert) || n_expert_used < 1) {
    return error(StatusCode::kInternal, "expert cache: {} experts for {} layers of {}", experts.size(), n_layer, n_expert);
  }
  std::unique_ptr<ExpertCache> c(new ExpertCache());
  ORK_ASSIGN_OR_RETURN(c->file_, DirectReader::open(path));
  c->slot_bytes_ = slot_bytes_for(experts);
  const uint64_t n_slots = std::min<uint64_t>(o.bytes / std::max<uint64_t>(c->slot_bytes_, 1), experts.size());
  if (n_slots < static_cast<uint64_t>(min_slots(n_expert_used)) && n_slots < experts.size()) {
    return error(StatusCode::kResourceExhausted,
                 "{}: the expert cache has {:.1f} MiB, room for {} experts of {:.2f} MiB; it needs at least {} (a layer's "
                 "{} routed experts and the next layer's): {:.1f} MiB",
                 path, static_cast<double>(o.bytes) / (1 << 20), n_slots, static_cast<double>(c->slot_bytes_) / (1 << 20),
                 min_slots(n_expert_used), n_expert_used,
                 static_cast<double>(c->slot_bytes_ * static_cast<uint64_t>(min_slots(n_expert_used))) / (1 << 20));
  }
  c->experts_ = std::move(experts);
  c->placements_.resize(c->experts_.size());
  for (size_t key = 0; key < c->experts_.size(); ++key) {
    uint64_t at = 0;
    for (int m = 0; m < 3; ++m) {
      Placement& p = c->placements_[key][static_cast<size_t>(m)];
      p = place(c->experts_[key].m[m]);
      p.at = at;
      at += p.size;
    }
  }
  c->n_expert_ = n_expert;
  c->n_expert_used_ = n_expert_used;
  c->policy_ = o.policy;
  // On 2 MiB pages where the kernel grants them: the experts are read by
  // the same streaming kernels as resident weights, which run a third or
  // more slower on 4 KiB pages (docs/BENCHMARKS.md section 11).
  c->arena_bytes_ = static_cast<size_t>(n_slots * c->slot_bytes_);
  c->arena_ = HugePages(std::max<size_t>(c->arena_bytes_, kDirectAlign));
  if (c->arena_.data() == nullptr) {
    return error(StatusCode::kResourceExhausted, "{}: cannot allocate the expert cache's {:.1f} MiB", path,
                 static_cast<double>(c->arena_bytes_) / (1 << 20));
  }
  // Faulted in now, not by the reads during decode: a first touch of each
  // 2 MiB page clears it, and with a cache still filling that cost fell on
  // every miss (on the 12-layer shape with 880 slots decode ran at half
  // speed until every slot had been used once).
  for (size_t at = 0; at < c->arena_bytes_; at += kDirectAlign) c->arena_.data()[at] = 0;
  c->slots_.resize(static_cast<size_t>(n_slots));
  for (size_t i = 0; i < c->slots_.size(); ++i) c->slots_[i].mem = c->arena_.data() + i * c->slot_bytes_;
  c->slot_of_.assign(c->experts_.size(), -1);
  c->uses_.assign(c->experts_.size(), 0);
  c->stats_.slots = n_slots;
  c->stats_.slot_bytes = c->slot_bytes_;
  c->stats_.direct = c->file_.direct();
  c->trace_tracks_.assign(static_cast<size_t>(std::max(1, o.io_threads)), 0);
  for (int i = 0; i < std::max(1, o.io_threads); ++i) c->io_.emplace_back([p = c.get(), i] { p->io_loop(i); });
  return c;
}

ExpertCache::~ExpertCache() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : io_) t.join();
}

void ExpertCache::set_trace(Trace* trace) {
  std::lock_guard lock(mu_);
  trace_ = trace;
  // A track per I/O thread: reads in flight at once overlap, and one
  // track's events must nest.
  for (size_t i = 0; trace_ != nullptr && i < trace_tracks_.size(); ++i) {
    trace_tracks_[i] = trace_->track(fmt::format("expert reads {}", i));
  }
}

int ExpertCache::victim(bool for_prefetch) const {
  // Empty slots first; then by policy among the unpinned, settled ones -
  // passing over, while any other will do, what a prefetch brought in for
  // the layer now asking and it has not asked for yet (it is about to).
  int best = -1;
  bool best_fresh = false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.state == State::kEmpty) return static_cast<int>(i);
    if (s.pins > 0 || s.state == State::kLoading) continue;
    // A prefetch does not push out what this step used or brought in.
    if (for_prefetch && s.last_use >= step_start_) continue;
    const bool fresh = s.prefetched && s.key / n_expert_ == last_layer_;
    bool better = best < 0 || (best_fresh && !fresh);
    if (!better && best >= 0 && fresh == best_fresh) {
      const Slot& b = slots_[static_cast<size_t>(best)];
      if (policy_ == ExpertPolicy::kLfu) {
        const uint64_t us = uses_[static_cast<size_t>(s.key)], ub = uses_[static_cast<size_t>(b.key)];
        better = us < ub || (us == ub && s.last_use < b.last_use);
      } else {
        better = s.last_use < b.last_use;
      }
    }
    if (better) {
      best = static_cast<int>(i);
      best_fresh = fresh;
    }
  }
  return best;
}

void ExpertCache::start_read(int slot, int key, bool front) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.key >= 0) slot_of_[static_cast<size_t>(s.key)] = -1;
  s.key = key;
  s.state = State::kLoading;
  s.error = Status::ok();
  s.reads_left = 3;
  slot_of_[static_cast<size_t>(key)] = slot;
  for (int m = 0; m < 3; ++m) {
    if (front) {
      queue_.push_front({slot, 2 - m});
    } else {
      queue_.push_back({slot, m});
    }
  }
  work_cv_.notify_all();
}

Status ExpertCache::request(int layer, std::span<const int32_t> ids) {
  std::unique_lock lock(mu_);
  if (ids.size() > slots_.size()) {
    return error(StatusCode::kInternal, "expert cache: {} experts asked at once, {} slots", ids.size(), slots_.size());
  }
  // All or nothing: a request that cannot have a slot for each miss waits,
  // holding no pin, until reads finish or other sequences release theirs -
  // so two sequences never each hold half of what the other needs.
  for (;;) {
    int misses = 0, free = 0;
    bool busy = false;
    for (int32_t id : ids) misses += slot_of_[static_cast<size_t>(layer * n_expert_ + id)] < 0;
    for (const Slot& s : slots_) {
      const bool asked = s.key >= 0 && s.key / n_expert_ == layer &&
                         std::find(ids.begin(), ids.end(), s.key % n_expert_) != ids.end();
      busy = busy || s.pins > 0 || s.state == State::kLoading;
      free += !asked && s.pins == 0 && s.state != State::kLoading;
    }
    if (free >= misses) break;
    if (!busy) {
      return error(StatusCode::kInternal, "{}: the expert cache's {} slots cannot take {} experts", file_.path(),
                   slots_.size(), misses);
    }
    ready_cv_.wait(lock);
  }
  if (layer != last_layer_) {
    step_start_ = tick_ + 1;
    last_layer_ = layer;
  }
  // Hits first, pinned, so that no miss of this request evicts them.
  for (int pass = 0; pass < 2; ++pass) {
    for (int32_t id : ids) {
      const int key = layer * n_expert_ + id;
      int slot = slot_of_[static_cast<size_t>(key)];
      if ((pass == 0) != (slot >= 0)) continue;
      ++uses_[static_cast<size_t>(key)];
      ++stats_.requests;
      if (slot >= 0) {
        ++stats_.hits;
        Slot& s = slots_[static_cast<size_t>(slot)];
        if (s.prefetched) ++stats_.prefetch_used;
        s.prefetched = false;
      } else {
        slot = victim(false);
        if (slot < 0) return error(StatusCode::kInternal, "{}: no expert cache slot is free", file_.path());
        start_read(slot, key, /*front=*/true);
      }
      Slot& s = slots_[static_cast<size_t>(slot)];
      ++s.pins;
      s.last_use = ++tick_;
    }
  }
  return Status::ok();
}

Status ExpertCache::lend(int layer, std::span<const int32_t> ids, std::vector<WeightView>& gate,
                         std::vector<WeightView>& up, std::vector<WeightView>& down) {
  std::lock_guard lock(mu_);
  for (int32_t id : ids) {
    const int slot = slot_of_[static_cast<size_t>(layer * n_expert_ + id)];
    if (slot < 0) return error(StatusCode::kInternal, "expert cache: layer {} expert {} was not requested", layer, id);
    const Slot& s = slots_[static_cast<size_t>(slot)];
    gate[static_cast<size_t>(id)] = view_of(s, 0);
    up[static_cast<size_t>(id)] = view_of(s, 1);
    down[static_cast<size_t>(id)] = view_of(s, 2);
  }
  return Status::ok();
}

bool ExpertCache::present(int layer, int32_t id) const {
  std::lock_guard lock(mu_);
  const int slot = slot_of_[static_cast<size_t>(layer * n_expert_ + id)];
  return slot < 0 || slots_[static_cast<size_t>(slot)].state != State::kLoading;
}

Status ExpertCache::await_one(int layer, int32_t id) {
  std::unique_lock lock(mu_);
  const int slot = slot_of_[static_cast<size_t>(layer * n_expert_ + id)];
  if (slot < 0) return error(StatusCode::kInternal, "expert cache: layer {} expert {} was not requested", layer, id);
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.state == State::kLoading) {
    // Stalled: wall time with at least one caller waiting (two threads
    // waiting at once count once).
    if (waiting_++ == 0) stall_since_ = std::chrono::steady_clock::now();
    ready_cv_.wait(lock, [&] { return s.state != State::kLoading; });
    if (--waiting_ == 0) stats_.stall_seconds += seconds_since(stall_since_);
  }
  return s.state == State::kFailed ? s.error : Status::ok();
}

Status ExpertCache::wait(int layer, std::span<const int32_t> ids, std::vector<WeightView>& gate,
                         std::vector<WeightView>& up, std::vector<WeightView>& down) {
  Status first = Status::ok();
  for (int32_t id : ids) {
    Status s = await_one(layer, id);
    if (!s.is_ok() && first.is_ok()) first = std::move(s);
  }
  if (!first.is_ok()) return first;
  return lend(layer, ids, gate, up, down);
}

void ExpertCache::release(int layer, std::span<const int32_t> ids) {
  std::lock_guard lock(mu_);
  for (int32_t id : ids) {
    const int slot = slot_of_[static_cast<size_t>(layer * n_expert_ + id)];
    if (slot < 0) continue;
    Slot& s = slots_[static_cast<size_t>(slot)];
    if (s.pins > 0) --s.pins;
    // A failed read is forgotten once nobody holds it: the next request
    // reads again (and fails again, if the file is still short).
    if (s.pins == 0 && s.state == State::kFailed) {
      slot_of_[static_cast<size_t>(s.key)] = -1;
      s.key = -1;
      s.state = State::kEmpty;
    }
  }
  ready_cv_.notify_all();
}

void ExpertCache::prefetch(int layer, std::span<const int32_t> ids) {
  std::lock_guard lock(mu_);
  for (int32_t id : ids) {
    const int key = layer * n_expert_ + id;
    if (slot_of_[static_cast<size_t>(key)] >= 0) continue;
    const int slot = victim(true);
    if (slot < 0) return;
    ++stats_.prefetches;
    start_read(slot, key, /*front=*/false);
    Slot& s = slots_[static_cast<size_t>(slot)];
    s.prefetched = true;
    s.last_use = ++tick_;
  }
}

WeightView ExpertCache::view_of(const Slot& s, int i) const {
  const Matrix& m = experts_[static_cast<size_t>(s.key)].m[i];
  const Placement& p = placements_[static_cast<size_t>(s.key)][static_cast<size_t>(i)];
  WeightView v = m.view;
  v.data = s.mem + p.at + p.data_at;
  v.scales = m.scales.bytes == 0 ? nullptr : reinterpret_cast<const float*>(s.mem + p.at + p.f32_scales_at);
  return v;
}

void ExpertCache::io_loop(int index) {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const Task task = queue_.front();
    queue_.pop_front();
    Slot& s = slots_[static_cast<size_t>(task.slot)];
    const Expert& e = experts_[static_cast<size_t>(s.key)];
    const Placement& l = placements_[static_cast<size_t>(s.key)][static_cast<size_t>(task.matrix)];
    uint8_t* dst = s.mem + l.at;
    Trace* trace = trace_;
    const int track = trace_tracks_[static_cast<size_t>(index)];
    const int key = s.key;
    if (reading_++ == 0) busy_since_ = std::chrono::steady_clock::now();
    // The slot is kLoading: nobody moves or evicts it while it is read.
    lock.unlock();
    const double trace_t0 = trace != nullptr ? trace->now_us() : 0.0;
    const auto t0 = std::chrono::steady_clock::now();
    Status st = Status::ok();
    uint64_t bytes = 0;
    for (int r = 0; r < l.n_reads && st.is_ok(); ++r) {
      st = file_.read(l.read[r].offset, l.read[r].bytes, dst + l.read_at[r]);
      bytes += DirectReader::aligned_span(l.read[r].offset, l.read[r].bytes);
    }
    if (st.is_ok() && l.widen) {
      widen_f16_scales(dst + l.scales_at, static_cast<uint64_t>(e.m[task.matrix].view.rows),
                       reinterpret_cast<float*>(dst + l.f32_scales_at));
    }
    if (const OrkpackTensor* entry = e.m[task.matrix].entry; st.is_ok() && entry != nullptr) {
      // The values the file's open left unchecked, as they arrive.
      OrkpackTensor t = *entry;
      t.data = dst + l.data_at;
      t.scales = t.scales_size > 0 ? reinterpret_cast<const float*>(dst + l.f32_scales_at) : nullptr;
      st = orkpack_check_values(t);
      if (!st.is_ok()) st = st.with_context(file_.path());
    }
    const double took = seconds_since(t0);
    if (trace != nullptr) trace->add("expert read", track, trace_t0, key);
    lock.lock();
    if (--reading_ == 0) stats_.busy_seconds += seconds_since(busy_since_);
    stats_.read_seconds += took;
    stats_.bytes_read += bytes;
    stats_.reads += static_cast<uint64_t>(l.n_reads);
    if (!st.is_ok() && s.error.is_ok()) s.error = std::move(st);
    if (--s.reads_left == 0) {
      s.state = s.error.is_ok() ? State::kReady : State::kFailed;
      if (s.state == State::kFailed && s.pins == 0) {
        // A prefetch that failed: nobody waits on it; forget it.
        slot_of_[static_cast<size_t>(s.key)] = -1;
        s.key = -1;
        s.state = State::kEmpty;
      }
      ready_cv_.notify_all();
    }
  }
}

ExpertCacheStats ExpertCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace ork
