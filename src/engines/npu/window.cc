// The address window of a vnpu session and the 128-byte line ownership
// record (see vnpu.h).
#include <algorithm>

#include "engines/npu/vnpu.h"

namespace ork::npu {
namespace {

constexpr int64_t kPage = 4096;  // mappings start on page boundaries
int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

}  // namespace

std::optional<DevAddr> AddressWindow::find_gap(int64_t bytes) const {
  int64_t at = kPage;  // address 0 stays unmapped
  for (const auto& [addr, m] : by_addr_) {
    if (at + bytes <= static_cast<int64_t>(addr)) return static_cast<DevAddr>(at);
    at = align_up(static_cast<int64_t>(addr) + m.bytes, kPage);
  }
  if (at + bytes <= bytes_) return static_cast<DevAddr>(at);
  return std::nullopt;
}

void AddressWindow::unmap_locked(DevAddr addr) {
  const auto it = by_addr_.find(addr);
  if (it == by_addr_.end()) return;
  NpuTraceScope t(trace_, TraceKind::kUnmap, session_, static_cast<int64_t>(stats_.unmaps + 1));
  stats_.mapped_bytes -= it->second.bytes;
  if (it->second.pinned) stats_.pinned_bytes -= it->second.bytes;
  by_host_.erase(it->second.host);
  by_addr_.erase(it);
  ++stats_.unmaps;
}

Result<DevAddr> AddressWindow::map(const void* host, int64_t bytes, bool pinned, uint64_t job) {
  std::lock_guard lock(mu_);
  bytes = std::max<int64_t>(bytes, 1);
  if (const auto it = by_host_.find(host); it != by_host_.end()) {
    Mapping& m = by_addr_.at(it->second);
    if (m.bytes == bytes) {
      m.last_job = job;
      m.last_use = ++clock_;
      m.pinned = m.pinned || pinned;
      return it->second;
    }
    unmap_locked(it->second);  // the same address, a different buffer now
  }
  if (bytes > bytes_ - kPage) {
    return error(StatusCode::kUnsupported, "vnpu session {}: a {:.1f} MiB buffer does not fit the {:.1f} MiB address window",
                 session_, static_cast<double>(bytes) / (1 << 20), static_cast<double>(bytes_) / (1 << 20));
  }
  std::optional<DevAddr> at = find_gap(bytes);
  while (!at) {
    // Evict the least recently used unpinned mapping the job does not use.
    const Mapping* victim = nullptr;
    DevAddr victim_addr = 0;
    for (const auto& [addr, m] : by_addr_) {
      if (m.pinned || m.last_job == job) continue;
      if (victim == nullptr || m.last_use < victim->last_use) {
        victim = &m;
        victim_addr = addr;
      }
    }
    if (victim == nullptr) {
      return error(StatusCode::kUnsupported,
                   "vnpu session {}: the {:.1f} MiB address window cannot hold a {:.1f} MiB buffer: {:.1f} MiB pinned, "
                   "the rest in use by this job",
                   session_, static_cast<double>(bytes_) / (1 << 20), static_cast<double>(bytes) / (1 << 20),
                   static_cast<double>(stats_.pinned_bytes) / (1 << 20));
    }
    unmap_locked(victim_addr);
    ++stats_.evictions;
    at = find_gap(bytes);
  }
  NpuTraceScope t(trace_, TraceKind::kMap, session_, static_cast<int64_t>(stats_.maps + 1));
  by_addr_[*at] = {static_cast<uint8_t*>(const_cast<void*>(host)), bytes, pinned, job, ++clock_};
  by_host_[host] = *at;
  ++stats_.maps;
  stats_.mapped_bytes += bytes;
  if (pinned) stats_.pinned_bytes += bytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.mapped_bytes);
  return *at;
}

Result<uint8_t*> AddressWindow::translate(DevAddr addr, int64_t bytes) const {
  std::lock_guard lock(mu_);
  auto it = by_addr_.upper_bound(addr);
  if (it != by_addr_.begin()) {
    --it;
    const int64_t off = static_cast<int64_t>(addr - it->first);
    if (off + bytes <= it->second.bytes) return it->second.host + off;
  }
  return error(StatusCode::kInternal, "vnpu session {}: DMA touches unmapped device range [{:#x}, +{})", session_, addr, bytes);
}

void AddressWindow::unmap(const void* host) {
  std::lock_guard lock(mu_);
  if (const auto it = by_host_.find(host); it != by_host_.end()) unmap_locked(it->second);
}

Result<DevAddr> AddressWindow::lookup(const void* host) const {
  std::lock_guard lock(mu_);
  if (const auto it = by_host_.find(host); it != by_host_.end()) return it->second;
  return error(StatusCode::kInternal, "vnpu session {}: a pinned buffer is not mapped", session_);
}

bool AddressWindow::is_mapped(const void* host) const {
  std::lock_guard lock(mu_);
  return by_host_.count(host) != 0;
}

AddressWindow::Stats AddressWindow::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

// ---------------------------------------------------------------- lines

void LineOwnership::reset() {
  std::lock_guard lock(mu_);
  owner_.clear();
}

void LineOwnership::record(int session, const uint8_t* begin, int64_t bytes) {
  if (bytes <= 0) return;
  const auto first = reinterpret_cast<uintptr_t>(begin) / kLineBytes;
  const auto last = (reinterpret_cast<uintptr_t>(begin) + static_cast<uintptr_t>(bytes) - 1) / kLineBytes;
  std::lock_guard lock(mu_);
  for (uintptr_t line = first; line <= last; ++line) {
    const auto [it, fresh] = owner_.emplace(line, session);
    if (!fresh && it->second != session) ++conflicts_;
  }
}

}  // namespace ork::npu
