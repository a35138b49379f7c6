// How much memory this process may still take: the kernel's MemAvailable,
// capped by the memory cgroup the process runs in (v1 or v2), whose limit
// counts the page cache too. Checked before large allocations, so that a
// request that cannot fit is a clear error instead of the OOM killer or an
// uncaught std::bad_alloc.
#pragma once

#include <cstdint>
#include <optional>

namespace ork {

// Bytes available, or nullopt when neither /proc/meminfo nor a cgroup
// limit can be read (nothing to go by).
std::optional<uint64_t> available_memory_bytes();

// What a large allocation leaves of `available` for the rest of the process:
// 512 MiB, or a quarter of a small budget.
inline uint64_t memory_margin(uint64_t available) { return available / 4 < (uint64_t{512} << 20) ? available / 4 : uint64_t{512} << 20; }

}  // namespace ork
