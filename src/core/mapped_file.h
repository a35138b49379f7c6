// A read-only view of a whole file: memory-mapped, or read into memory of
// its own (Residency::kResident) backed by 2 MiB pages where the kernel
// grants them (transparent huge pages). Move-only; unmaps on destruction.
// Also holds an owned in-memory buffer, so code that parses a file (GGUF,
// orkpack) works the same on bytes built in memory.
//
// Why a resident copy: decode streams every weight once per token, and on
// 4 KiB pages the hardware prefetcher stops at every page boundary and the
// TLB misses every 4 KiB; two threads read about 13 % faster from 2 MiB
// pages on the development machine (docs/BENCHMARKS.md). A mapping starts
// faster and shares the page cache between processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ork/status.h"

namespace ork {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  enum class Residency { kMapped, kResident };

  // kResident falls back to a mapping (resident() false) when the file
  // would not fit in the memory available (the kernel's figure, capped by the
  // memory cgroup), less 512 MiB or a quarter of it, whichever is smaller:
  // a copy that pushes the machine into swap or the OOM killer is worse than
  // a slower decode.
  static Result<MappedFile> open(const std::string& path, Residency residency = Residency::kMapped);
  // Whether a resident copy of `bytes` fits (see above).
  static bool resident_fits(size_t bytes);
  static MappedFile from_bytes(std::vector<uint8_t> bytes, std::string name);
  // The first `size` bytes of `pages` (a file image built in memory, e.g.
  // a conversion), resident, standing for the file `name`.
  static MappedFile from_pages(struct HugePages pages, size_t size, std::string name);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool resident() const { return resident_; }

 private:
  void release();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  // The mapping to release (a file mapping or the resident copy's pages).
  void* map_base_ = nullptr;
  size_t map_size_ = 0;
  std::vector<uint8_t> owned_;
  std::string path_;
  bool resident_ = false;
};

// Anonymous memory of `bytes`, aligned to 2 MiB and advised to be backed by
// huge pages (best effort). nullptr if the mapping fails.
struct HugePages {
  HugePages() = default;
  explicit HugePages(size_t bytes);
  ~HugePages();
  HugePages(HugePages&& other) noexcept;
  HugePages& operator=(HugePages&& other) noexcept;
  HugePages(const HugePages&) = delete;
  HugePages& operator=(const HugePages&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Gives up ownership: the caller unmaps [base, base + mapped_bytes).
  void release_to(void** base, size_t* mapped_bytes);

 private:
  void* base_ = nullptr;
  size_t mapped_ = 0;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ork
