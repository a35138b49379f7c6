// The strict-FIFO DMA queue of a vnpu session, served by its own thread
// (see vnpu.h).
#include <cstring>

#include "engines/npu/vnpu.h"

namespace ork::npu {

DmaQueue::DmaQueue(Session* s) : s_(s), thread_([this] { serve(); }) {}

DmaQueue::~DmaQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DmaQueue::push(const DmaDesc& d) {
  NpuTraceScope t(s_->trace(), TraceKind::kDmaPush, s_->index(), static_cast<int64_t>(pushes_ + 1));
  {
    std::lock_guard lock(mu_);
    queue_.push_back({d, false, Status::ok()});
    ++pushes_;
  }
  cv_.notify_all();
}

Status DmaQueue::pop(int64_t progress) {
  NpuTraceScope t(s_->trace(), TraceKind::kDmaWait, s_->index(), progress);
  std::unique_lock lock(mu_);
  if (queue_.empty()) return error(StatusCode::kInternal, "vnpu session {}: DMA pop with nothing pushed", s_->index());
  cv_.wait(lock, [&] { return queue_.front().done; });
  Status st = std::move(queue_.front().status);
  queue_.pop_front();
  --next_;
  ++pops_;
  return st;
}

Status DmaQueue::flush() {
  Status first = Status::ok();
  while (outstanding() > 0) {
    Status s = pop(-1);
    if (first.is_ok() && !s.is_ok()) first = std::move(s);
  }
  return first;
}

int64_t DmaQueue::outstanding() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

Status DmaQueue::execute(const DmaDesc& d) {
  const int64_t ddr_span = (d.rows - 1) * d.ddr_stride + d.row_bytes;
  const int64_t vtcm_span = (d.rows - 1) * d.vtcm_stride + d.row_bytes;
  if (d.rows < 1 || d.row_bytes < 0 || d.vtcm < 0 || d.vtcm + vtcm_span > s_->vtcm_bytes()) {
    return error(StatusCode::kInternal, "vnpu session {}: DMA descriptor outside VTCM ({} + {} > {})", s_->index(), d.vtcm,
                 vtcm_span, s_->vtcm_bytes());
  }
  ORK_ASSIGN_OR_RETURN(uint8_t * ddr, s_->window().translate(d.ddr, ddr_span));
  uint8_t* vtcm = s_->vtcm() + d.vtcm;
  for (int64_t r = 0; r < d.rows; ++r) {
    uint8_t* dp = ddr + r * d.ddr_stride;
    uint8_t* vp = vtcm + r * d.vtcm_stride;
    if (d.to_vtcm) {
      std::memcpy(vp, dp, static_cast<size_t>(d.row_bytes));
    } else {
      std::memcpy(dp, vp, static_cast<size_t>(d.row_bytes));
      if (LineOwnership* lines = s_->lines()) lines->record(s_->index(), dp, d.row_bytes);
    }
  }
  bytes_ += d.rows * d.row_bytes;
  return Status::ok();
}

void DmaQueue::serve() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || next_ < queue_.size(); });
    if (stop_) return;
    const DmaDesc d = queue_[next_].d;
    lock.unlock();
    Status st = execute(d);
    lock.lock();
    queue_[next_].status = std::move(st);
    queue_[next_].done = true;
    ++next_;
    cv_.notify_all();
  }
}

}  // namespace ork::npu
