#include "cache_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

namespace ork::cli {
namespace {

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The detached writer's whole life: only async-signal-safe calls (it is a
// fork of a process that has other threads).
[[noreturn]] void write_and_publish(int fd, const uint8_t* data, size_t size, const char* temp, const char* entry,
                                    const char* dir) {
  // Nothing of ork's but the image and the temporary: a pipe ork writes to
  // (`out=$(ork run ...)`) must see its end when ork exits, not when the
  // entry is saved; nor may a socket stay bound.
  const int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    (void)dup2(null, 0);
    (void)dup2(null, 1);
    (void)dup2(null, 2);
    if (null > 2) (void)close(null);
  }
  for (int other = 3; other < 4096; ++other) {
    if (other != fd) (void)close(other);
  }
  (void)setpriority(PRIO_PROCESS, 0, 10);  // the model's threads come first
  for (size_t off = 0; off < size;) {
    const ssize_t n = pwrite(fd, data + off, size - off < (size_t{64} << 20) ? size - off : size_t{64} << 20,
                             static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      (void)unlink(temp);
      _exit(1);
    }
    off += static_cast<size_t>(n);
  }
  // Renamed while still open: whoever watches the temporary sees it held
  // until it has its final name.
  if (ftruncate(fd, static_cast<off_t>(size)) != 0 || fsync(fd) != 0 || rename(temp, entry) != 0) {
    (void)unlink(temp);
    _exit(1);
  }
  (void)close(fd);
  const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);  // the rename, durable
    (void)close(dfd);
  }
  _exit(0);
}

}  // namespace

Status save_detached(const MappedFile& image, const std::string& entry) {
  const std::string dir = dir_of(entry);
  const std::string temp = fmt::format("{}/.{}.ork-w{}", dir, base_of(entry), static_cast<long long>(::getpid()));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return error(StatusCode::kIo, "cannot create {}: {}", temp, std::strerror(errno));
  auto fail = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    return error(StatusCode::kIo, "{} {}: {}", what, temp, std::strerror(err));
  };
  // Room for all of it now, or a warning now - not a failure nobody sees.
  if (const int rc = posix_fallocate(fd, 0, static_cast<off_t>(image.size())); rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
    errno = rc;
    return fail(fmt::format("no room for {} bytes in", image.size()));
  }
  const pid_t child = ::fork();
  if (child < 0) return fail("cannot start the writer of");
  if (child == 0) {
    // Detached from the terminal's signals and from this process's end; the
    // grandchild, reparented, leaves no zombie behind.
    (void)setsid();
    const pid_t writer = ::fork();
    if (writer != 0) _exit(writer < 0 ? 1 : 0);
    write_and_publish(fd, image.data(), image.size(), temp.c_str(), entry.c_str(), dir.c_str());
  }
  ::close(fd);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ::unlink(temp.c_str());
    return error(StatusCode::kIo, "cannot start the writer of {}", temp);
  }
  return Status::ok();
}

void clear_stale_temporaries(const std::string& entry) {
  const std::string dir = dir_of(entry);
  const std::string prefix = "." + base_of(entry) + ".ork-";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const std::time_t now = std::time(nullptr);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && now - st.st_mtime > 600) ::unlink(path.c_str());
  }
  ::closedir(d);
}

}  // namespace ork::cli
