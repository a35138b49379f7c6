#include "core/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/escape.h"
#include "core/memory.h"

namespace ork {
namespace {

namespace fs = std::filesystem;

// A directory of its own per test (the pid keeps parallel runs apart).
std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

int entries(const std::string& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(OutputFile, TheTargetIsTheOldFileUntilCommitThenTheWholeNewOne) {
  const std::string dir = fresh_dir("commit");
  const std::string path = dir + "/out.bin";
  write(path, "old");
  auto f = OutputFile::create(path);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  ASSERT_TRUE(f->write("new contents, ").is_ok());
  std::string big(3 << 20, 'x');  // past the buffer
  ASSERT_TRUE(f->write(big).is_ok());
  ASSERT_TRUE(f->write_at(0, "NEW", 3).is_ok());
  EXPECT_EQ(read(path), "old");
  EXPECT_EQ(entries(dir), 2);  // the target and one temporary
  ASSERT_TRUE(f->commit().is_ok());
  EXPECT_EQ(read(path), "NEW contents, " + big);
  EXPECT_EQ(entries(dir), 1);
}

TEST(OutputFile, AnAbandonedFileLeavesNothing) {
  const std::string dir = fresh_dir("abandon");
  const std::string path = dir + "/out.bin";
  write(path, "keep me");
  {
    auto f = OutputFile::create(path);
    ASSERT_TRUE(f.is_ok());
    ASSERT_TRUE(f->write("half").is_ok());
  }
  EXPECT_EQ(read(path), "keep me");
  EXPECT_EQ(entries(dir), 1);
}

// The temporary name is not predictable and never opened through an
// existing name: a link planted where "out.bin.tmp" used to be, or at the
// target itself, does not redirect the write.
TEST(OutputFile, PlantedLinksAreNeverFollowed) {
  const std::string dir = fresh_dir("links");
  const std::string victim = dir + "/victim";
  write(victim, "precious");
  const std::string path = dir + "/out.bin";
  fs::create_symlink(victim, path + ".tmp");
  ASSERT_TRUE(write_file_atomically(path, "output").is_ok());
  EXPECT_EQ(read(victim), "precious");
  EXPECT_EQ(read(path), "output");
  // A link at the target is replaced by the file; what it pointed at stays.
  const std::string linked = dir + "/linked.bin";
  fs::create_symlink(victim, linked);
  ASSERT_TRUE(write_file_atomically(linked, "replaced").is_ok());
  EXPECT_EQ(read(victim), "precious");
  EXPECT_FALSE(fs::is_symlink(linked));
  EXPECT_EQ(read(linked), "replaced");
}

TEST(OutputFile, ANewFileGetsTheUsualPermissions) {
  const std::string dir = fresh_dir("mode");
  const mode_t mask = ::umask(022);
  ASSERT_TRUE(write_file_atomically(dir + "/f", "x").is_ok());
  ::umask(mask);
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

// Killed mid-write (SIGTERM, as a user's Ctrl-C or a timeout would), a
// process leaves neither a temporary nor a partial target behind.
TEST(OutputFile, AFatalSignalRemovesTheTemporary) {
  const std::string dir = fresh_dir("signal");
  const std::string path = dir + "/out.bin";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto f = OutputFile::create(path);
    if (!f.is_ok() || !f->write(std::string(1 << 16, 'y')).is_ok()) _exit(3);
    std::raise(SIGTERM);
    _exit(4);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(entries(dir), 0);
}

// A signal may arrive at any moment, on any thread: while a temporary is
// being created included (mkstemp-then-register once left a window there in
// which `ork synth` killed by SIGTERM left its temporary behind). Children
// create and abandon files on two threads and are killed at random times.
TEST(OutputFile, ASignalAtAnyMomentLeavesNothing) {
  const std::string dir = fresh_dir("signal_any");
  for (int round = 0; round < 40; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto churn = [&](const std::string& name) {
        for (;;) {
          auto f = OutputFile::create(dir + "/" + name);
          if (!f.is_ok()) _exit(3);
        }
      };
      std::thread other(churn, "a.bin");
      churn("b.bin");
    }
    ::usleep(2000 + static_cast<useconds_t>(round * 397 % 3000));
    ::kill(child, SIGTERM);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "round " << round << ": " << status;
    ASSERT_EQ(entries(dir), 0) << "round " << round;
  }
}

TEST(OutputFile, DevicesAreWrittenInPlaceAndDirectoriesRefused) {
  EXPECT_TRUE(write_file_atomically("/dev/null", "discarded").is_ok());
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  const std::string dir = fresh_dir("isdir");
  const Status s = write_file_atomically(dir, "x");
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("is a directory"), std::string::npos) << s.message();
}

TEST(CheckOutputPath, RefusesTheInputAMissingDirectoryAndADirectory) {
  const std::string dir = fresh_dir("check");
  const std::string input = dir + "/model.gguf";
  write(input, "model");
  EXPECT_TRUE(check_output_path(dir + "/new.orkpack", {input}).is_ok());
  Status s = check_output_path(input, {input});
  EXPECT_NE(s.message().find("is the input file"), std::string::npos) << s.message();
  // Through a link, or a second name for the same inode.
  fs::create_symlink(input, dir + "/alias.gguf");
  fs::create_hard_link(input, dir + "/hard.gguf");
  EXPECT_FALSE(check_output_path(dir + "/alias.gguf", {input}).is_ok());
  EXPECT_FALSE(check_output_path(dir + "/hard.gguf", {input}).is_ok());
  s = check_output_path(dir + "/no/such/dir/out", {input});
  EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s.message();
  s = check_output_path(dir, {input}, "--trace");
  EXPECT_NE(s.message().find("--trace " + dir + ": is a directory"), std::string::npos) << s.message();
  EXPECT_EQ(read(input), "model");
}

TEST(CheckOutputPath, RefusesADirectoryItCannotWrite) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes anywhere: run as a user to check this";
  const std::string dir = fresh_dir("readonly");
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  const Status s = check_output_path(dir + "/out", {});
  fs::permissions(dir, fs::perms::owner_all);
  EXPECT_NE(s.message().find("is not writable"), std::string::npos) << s.message();
}

TEST(Escape, ControlsAndBrokenUtf8BecomeEscapesTextStays) {
  EXPECT_EQ(escape_text("blk.0.attn_q.weight"), "blk.0.attn_q.weight");
  EXPECT_EQ(escape_text("caf\xc3\xa9 \xe2\x96\x81x"), "caf\xc3\xa9 \xe2\x96\x81x");
  EXPECT_EQ(escape_text("a\x1b]0;pwned\x07z"), "a\\x1b]0;pwned\\x07z");
  EXPECT_EQ(escape_text("tab\there\nline"), "tab\\x09here\\x0aline");
  EXPECT_EQ(escape_text("\x7f\xc2\x9b"), "\\x7f\\xc2\\x9b");           // DEL, and C1 CSI as UTF-8
  EXPECT_EQ(escape_text("\xff\xc3(\xed\xa0\x80"), "\\xff\\xc3(\\xed\\xa0\\x80");  // invalid, truncated, a surrogate
  EXPECT_EQ(escape_stream_text("one\ttwo\r\nthree\x1b[2J"), "one\ttwo\r\nthree\\x1b[2J");
}

TEST(Memory, TheAvailableFigureIsPlausible) {
  const std::optional<uint64_t> available = available_memory_bytes();
  ASSERT_TRUE(available.has_value()) << "no /proc/meminfo and no cgroup limit";
  EXPECT_GT(*available, uint64_t{16} << 20);
  EXPECT_LT(*available, uint64_t{1} << 50);
}

}  // namespace
}  // namespace ork
