#include "core/output_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <random>

namespace ork {
namespace {

// Temporaries a fatal signal must remove. A handler may only call
// async-signal-safe functions, so the paths live in fixed slots it can
// read without locks: a slot is published (ready) only once its path is
// complete.
struct TempSlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 ready
  char path[4096] = {};
};
constexpr int kTempSlots = 64;
TempSlot g_temp_slots[kTempSlots];

// Other threads run on while the handler does: one may be creating a
// temporary at that moment. Creation is a short section with the fatal
// signals blocked on its thread, counted here; the handler (on another
// thread, then) closes the door and waits for the sections under way, so
// no file can appear after its sweep.
std::atomic<int> g_creating{0};
std::atomic<bool> g_dying{false};

void remove_temporaries_and_die(int sig) {
  g_dying.store(true);
  while (g_creating.load() > 0) {
  }
  for (TempSlot& s : g_temp_slots) {
    if (s.state.load(std::memory_order_acquire) == 2) ::unlink(s.path);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
  // The signal may have reached this thread inside a creation section,
  // with the fatal signals blocked (a sanitizer's runtime defers handlers
  // to a later call, past the thread's own mask): unblocked, the pending
  // signal kills here. Without the unblock the thread went on into a
  // section, found the door closed and paused for ever.
  sigset_t self;
  sigemptyset(&self);
  sigaddset(&self, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &self, nullptr);
  ::_exit(128 + sig);  // not reached
}

class CreationSection {
 public:
  CreationSection() {
    sigset_t fatal;
    sigemptyset(&fatal);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&fatal, sig);
    ::pthread_sigmask(SIG_BLOCK, &fatal, &old_);
    g_creating.fetch_add(1);
    if (g_dying.load()) {
      g_creating.fetch_sub(1);
      for (;;) ::pause();  // the handler is sweeping; the process is about to die
    }
  }
  ~CreationSection() {
    g_creating.fetch_sub(1);
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  CreationSection(const CreationSection&) = delete;
  CreationSection& operator=(const CreationSection&) = delete;

 private:
  sigset_t old_;
};

void install_handlers_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      // A program that handles the signal itself (ork chat's Ctrl-C) keeps
      // its handler; only the default action, which kills, is replaced.
      if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
        struct sigaction sa {};
        sa.sa_handler = remove_temporaries_and_die;
        sigemptyset(&sa.sa_mask);
        ::sigaction(sig, &sa, nullptr);
      }
    }
  });
}

int register_temp(const std::string& path) {
  if (path.size() >= sizeof(TempSlot::path)) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = 0;
    if (g_temp_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_temp_slots[i].path, path.c_str(), path.size() + 1);
      g_temp_slots[i].state.store(2, std::memory_order_release);
      return i;
    }
  }
  return -1;  // more than kTempSlots files at once: the destructor still cleans up
}

// By the index register_temp gave: only the handler reads another
// thread's path (comparing paths here read slots other threads were
// refilling, a race ThreadSanitizer caught).
void unregister_temp(int slot) {
  if (slot >= 0) g_temp_slots[slot].state.store(0, std::memory_order_release);
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Six characters from a per-process random stream, as mkstemp's XXXXXX;
// reseeded in a forked child, which would otherwise draw its parent's
// names (O_EXCL would still refuse a clash, at the cost of retries).
std::string random_suffix() {
  static std::mutex mutex;
  static std::mt19937_64 rng;
  static pid_t seeded_for = 0;
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::lock_guard<std::mutex> lock(mutex);
  if (const pid_t pid = ::getpid(); pid != seeded_for) {
    rng.seed(std::random_device{}() ^ (static_cast<uint64_t>(pid) << 32));
    seeded_for = pid;
  }
  std::string s(6, 'X');
  for (char& c : s) c = kChars[rng() % (sizeof(kChars) - 1)];
  return s;
}

constexpr size_t kBufferBytes = 1 << 20;

}  // namespace

Result<OutputFile> OutputFile::create(const std::string& path, bool seekable) {
  if (path.empty()) return error(StatusCode::kInvalidArgument, "no output path given");
  OutputFile f;
  f.path_ = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) return error(StatusCode::kInvalidArgument, "{}: is a directory", path);
    if (seekable) {
      return error(StatusCode::kInvalidArgument, "{}: not a regular file; this output is written to a regular file", path);
    }
    f.in_place_ = true;
    f.fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (f.fd_ < 0) return error(StatusCode::kIo, "{}: cannot open for writing: {}", path, std::strerror(errno));
    return f;
  }
  // The name is registered before the file exists: a signal delivered to
  // any thread at any moment finds every temporary that may be on disk
  // (mkstemp then register left a window in which a SIGTERM left one).
  install_handlers_once();
  for (int attempt = 0; f.fd_ < 0; ++attempt) {
    std::string tmp = dir_of(path) + "/." + base_of(path) + ".ork-" + random_suffix();
    int slot = -1;
    {
      CreationSection section;
      slot = register_temp(tmp);
      f.fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // less the umask, as fopen's
    }
    if (f.fd_ >= 0) {
      f.tmp_ = std::move(tmp);
      f.tmp_slot_ = slot;
      break;
    }
    const int err = errno;
    unregister_temp(slot);
    if (err != EEXIST || attempt >= 100) {
      return error(StatusCode::kIo, "{}: cannot create a file in {}: {}", path, dir_of(path), std::strerror(err));
    }
  }
  f.buffer_.reserve(kBufferBytes);
  return f;
}

OutputFile::~OutputFile() { discard(); }

OutputFile::OutputFile(OutputFile&& o) noexcept
    : fd_(o.fd_), tmp_slot_(o.tmp_slot_), path_(std::move(o.path_)), tmp_(std::move(o.tmp_)),
      in_place_(o.in_place_), size_(o.size_), buffer_(std::move(o.buffer_)) {
  o.fd_ = -1;
  o.tmp_slot_ = -1;
  o.tmp_.clear();
}

OutputFile& OutputFile::operator=(OutputFile&& o) noexcept {
  if (this != &o) {
    discard();
    fd_ = o.fd_;
    tmp_slot_ = o.tmp_slot_;
    path_ = std::move(o.path_);
    tmp_ = std::move(o.tmp_);
    in_place_ = o.in_place_;
    size_ = o.size_;
    buffer_ = std::move(o.buffer_);
    o.fd_ = -1;
    o.tmp_slot_ = -1;
    o.tmp_.clear();
  }
  return *this;
}

void OutputFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) {
    ::unlink(tmp_.c_str());
    unregister_temp(tmp_slot_);
    tmp_slot_ = -1;
    tmp_.clear();
  }
}

Status OutputFile::flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      buffer_.clear();
      return error(StatusCode::kIo, "{}: write failed: {}", path_, std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  return Status::ok();
}

Status OutputFile::write(const void* data, size_t bytes) {
  if (fd_ < 0) return error(StatusCode::kInternal, "{}: write after commit or failure", path_);
  const auto* p = static_cast<const uint8_t*>(data);
  size_ += bytes;
  if (buffer_.size() + bytes > kBufferBytes) ORK_RETURN_IF_ERROR(flush());
  if (bytes >= kBufferBytes) {
    buffer_.assign(p, p + bytes);
    return flush();
  }
  buffer_.insert(buffer_.end(), p, p + bytes);
  return Status::ok();
}

Status OutputFile::write_at(uint64_t offset, const void* data, size_t bytes) {
  if (fd_ < 0) return error(StatusCode::kInternal, "{}: write after commit or failure", path_);
  if (offset + bytes > size_) return error(StatusCode::kInternal, "{}: write_at past the end", path_);
  ORK_RETURN_IF_ERROR(flush());
  const auto* p = static_cast<const uint8_t*>(data);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pwrite(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return error(StatusCode::kIo, "{}: write failed: {}", path_, std::strerror(n < 0 ? errno : ENOSPC));
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

Status OutputFile::commit() {
  if (fd_ < 0) return error(StatusCode::kInternal, "{}: committed twice", path_);
  Status s = flush();
  if (s.is_ok() && !in_place_ && ::fsync(fd_) != 0) {
    s = error(StatusCode::kIo, "{}: cannot flush to disk: {}", path_, std::strerror(errno));
  }
  if (::close(fd_) != 0 && s.is_ok()) s = error(StatusCode::kIo, "{}: close failed: {}", path_, std::strerror(errno));
  fd_ = -1;
  if (!s.is_ok() || in_place_) {
    discard();
    return s;
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    discard();
    return error(StatusCode::kIo, "{}: cannot move into place: {}", path_, std::strerror(err));
  }
  unregister_temp(tmp_slot_);
  tmp_slot_ = -1;
  tmp_.clear();
  // The rename itself is durable once the directory is.
  const int dir = ::open(dir_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status::ok();
}

Status write_file_atomically(const std::string& path, std::string_view contents) {
  ORK_ASSIGN_OR_RETURN(OutputFile f, OutputFile::create(path));
  ORK_RETURN_IF_ERROR(f.write(contents));
  return f.commit();
}

Status check_output_path(const std::string& path, std::initializer_list<std::string> inputs, const char* what) {
  if (path.empty()) return error(StatusCode::kInvalidArgument, "{}: no output path given", what);
  struct stat out {};
  const bool exists = ::stat(path.c_str(), &out) == 0;
  if (exists && S_ISDIR(out.st_mode)) {
    return error(StatusCode::kInvalidArgument, "{} {}: is a directory; give a file name", what, path);
  }
  for (const std::string& in : inputs) {
    struct stat st {};
    if (exists && !in.empty() && ::stat(in.c_str(), &st) == 0 && st.st_dev == out.st_dev && st.st_ino == out.st_ino) {
      return error(StatusCode::kInvalidArgument, "{} {}: is the input file {}; writing it would destroy the input", what,
                   path, in);
    }
  }
  if (exists && !S_ISREG(out.st_mode)) return Status::ok();  // a device or FIFO, written in place
  const std::string dir = dir_of(path);
  struct stat d {};
  if (::stat(dir.c_str(), &d) != 0 || !S_ISDIR(d.st_mode)) {
    return error(StatusCode::kNotFound, "{} {}: the directory {} does not exist", what, path, dir);
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return error(StatusCode::kIo, "{} {}: the directory {} is not writable", what, path, dir);
  }
  return Status::ok();
}

}  // namespace ork
