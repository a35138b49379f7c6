#include "core/mapped_file.h"

#include "core/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

namespace ork {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

HugePages::HugePages(size_t bytes) {
  if (bytes == 0) return;
  mapped_ = bytes + kHugePage;
  void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    mapped_ = 0;
    return;
  }
  base_ = p;
  data_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~uintptr_t{kHugePage - 1});
  size_ = bytes;
  (void)madvise(data_, (bytes + kHugePage - 1) / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only
}

HugePages::~HugePages() {
  if (base_ != nullptr) munmap(base_, mapped_);
}

HugePages::HugePages(HugePages&& other) noexcept { *this = std::move(other); }

HugePages& HugePages::operator=(HugePages&& other) noexcept {
  if (this == &other) return *this;
  if (base_ != nullptr) munmap(base_, mapped_);
  base_ = std::exchange(other.base_, nullptr);
  mapped_ = std::exchange(other.mapped_, 0);
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  return *this;
}

void HugePages::release_to(void** base, size_t* mapped_bytes) {
  *base = std::exchange(base_, nullptr);
  *mapped_bytes = std::exchange(mapped_, 0);
  data_ = nullptr;
  size_ = 0;
}

bool MappedFile::resident_fits(size_t bytes) {
  const std::optional<uint64_t> available = available_memory_bytes();
  if (!available) return true;  // nothing to go by: try
  return bytes + memory_margin(*available) <= *available;
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this == &other) return *this;
  release();
  owned_ = std::move(other.owned_);
  map_base_ = std::exchange(other.map_base_, nullptr);
  map_size_ = std::exchange(other.map_size_, 0);
  size_ = other.size_;
  path_ = std::move(other.path_);
  resident_ = other.resident_;
  data_ = map_base_ != nullptr ? other.data_ : owned_.data();
  other.data_ = nullptr;
  other.size_ = 0;
  return *this;
}

void MappedFile::release() {
  if (map_base_ != nullptr) munmap(map_base_, map_size_);
  map_base_ = nullptr;
  map_size_ = 0;
  data_ = nullptr;
  size_ = 0;
  owned_.clear();
}

Result<MappedFile> MappedFile::open(const std::string& path, Residency residency) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error(StatusCode::kIo, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return error(StatusCode::kIo, "{}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return error(StatusCode::kInvalidArgument, "{}: not a regular file", path);
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ > 0 && residency == Residency::kResident && resident_fits(file.size_)) {
    HugePages mem(file.size_);
    if (mem.data() == nullptr) {
      ::close(fd);
      return error(StatusCode::kIo, "{}: cannot allocate {} bytes to read it into", path, file.size_);
    }
    // Whole reads of at most 64 MiB: a short read past the file's end
    // (the file shrank) is an error, an interrupted one is retried.
    for (size_t off = 0; off < file.size_;) {
      const ssize_t n = pread(fd, mem.data() + off, std::min(file.size_ - off, size_t{64} << 20), static_cast<off_t>(off));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : 0;
        ::close(fd);
        return error(StatusCode::kIo, "{}: read failed at byte {} of {}: {}", path, off, file.size_,
                     n < 0 ? std::strerror(err) : "unexpected end of file");
      }
      off += static_cast<size_t>(n);
    }
    file.data_ = mem.data();
    mem.release_to(&file.map_base_, &file.map_size_);
    file.resident_ = true;
  } else if (file.size_ > 0) {
    void* p = mmap(nullptr, file.size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return error(StatusCode::kIo, "{}: cannot mmap {} bytes: {}", path, file.size_, std::strerror(err));
    }
    file.data_ = static_cast<const uint8_t*>(p);
    file.map_base_ = p;
    file.map_size_ = file.size_;
  }
  ::close(fd);
  return file;
}

MappedFile MappedFile::from_pages(HugePages pages, size_t size, std::string name) {
  MappedFile file;
  file.data_ = pages.data();
  file.size_ = std::min(size, pages.size());
  file.path_ = std::move(name);
  file.resident_ = true;
  pages.release_to(&file.map_base_, &file.map_size_);
  return file;
}

MappedFile MappedFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  MappedFile file;
  file.owned_ = std::move(bytes);
  file.data_ = file.owned_.data();
  file.size_ = file.owned_.size();
  file.path_ = std::move(name);
  return file;
}

}  // namespace ork
