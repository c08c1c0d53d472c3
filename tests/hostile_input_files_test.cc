// Every reader of an input file (layout files, token maps, traces, tables,
// tensor headers) refuses what is not a regular file -- a never-ending
// device, a FIFO that would block the open forever, a directory -- at once,
// with an error naming the path and what it is, and refuses a whole-file
// input larger than its limit before reading it.
//
// Each read runs in a child process with a deadline, so a reader that would
// block or read forever fails the test instead of hanging it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engram/hasher.h"
#include "src/replay/trace_files.h"
#include "storage/embedded_hash_layout.h"
#include "storage/file_util.h"
#include "storage/npy_header.h"
#include "storage/safetensors_header.h"
#include "storage/table_file.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using Reader = std::function<Status(const std::string& path)>;

// Runs `reader` on `path` in a child process. The child's Status (as
// ToString()), or nullopt if it did not finish within `deadline` (it is then
// killed).
std::optional<std::string> ReadInChild(const Reader& reader, const std::string& path,
                                       std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child < 0) return "fork failed";
  if (child == 0) {
    ::close(pipe_fds[0]);
    const std::string text = reader(path).ToString();
    (void)!::write(pipe_fds[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string text;
  bool finished = false;
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n > 0) {
      text.append(buf, size_t(n));
      continue;
    }
    finished = true;  // end of file: the child is done
    break;
  }
  ::close(pipe_fds[0]);
  if (!finished) ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!finished) return std::nullopt;
  return text;
}

struct NamedReader {
  const char* name;
  Reader read;
  uint64_t max_bytes;  // whole-file readers: the size limit; 0 = reads a bounded header only
};

std::vector<NamedReader> Readers() {
  return {
      {"layout file", [](const std::string& p) { return EngramHashLayout::FromFile(p).status(); },
       kMaxLayoutFileBytes},
      {"layer layout", [](const std::string& p) { return LoadLayerHashLayout(p, 0).status(); },
       kMaxLayoutFileBytes},
      {"token map", [](const std::string& p) { return TokenMap::FromFile(p).status(); }, 1ull << 30},
      {"token file", [](const std::string& p) { return replay::ReadTokenFile(p).status(); }, 4ull << 30},
      {"row trace", [](const std::string& p) { return replay::ReadRowTrace(p).status(); }, 4ull << 30},
      {"table", [](const std::string& p) { return TableFile::Open(p).status(); }, 0},
      {"npy header", [](const std::string& p) { return ReadNpyHeader(p).status(); }, 0},
      {"safetensors header", [](const std::string& p) { return ReadSafetensorsHeader(p).status(); }, 0},
  };
}

class HostileInputFiles : public ::testing::Test {
 protected:
  // Each reader on `path`: refused within the deadline, InvalidArgument
  // naming the path and `kind`.
  void ExpectEveryReaderRefuses(const std::string& path, const std::string& kind) {
    for (const NamedReader& r : Readers()) {
      SCOPED_TRACE(r.name);
      const std::optional<std::string> result = ReadInChild(r.read, path);
      ASSERT_TRUE(result.has_value()) << r.name << " on " << path << " did not return: it blocks or reads forever";
      EXPECT_EQ(result->rfind("Invalid argument", 0), 0u) << *result;
      EXPECT_NE(result->find(path), std::string::npos) << *result;
      EXPECT_NE(result->find("not a regular file (" + kind + ")"), std::string::npos) << *result;
    }
  }
  testing::TempDir dir_;
};

TEST_F(HostileInputFiles, DevZeroIsRefusedWithoutBeingRead) {
  ExpectEveryReaderRefuses("/dev/zero", "a character device");
}

TEST_F(HostileInputFiles, FifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = dir_.File("input.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectEveryReaderRefuses(fifo, "a FIFO");
}

TEST_F(HostileInputFiles, DirectoryIsRefusedAsNotARegularFile) {
  // Not "size 9223372036854775807 bytes" (what ftell says of a directory).
  ExpectEveryReaderRefuses(dir_.path(), "a directory");
}

TEST_F(HostileInputFiles, SymlinkToADeviceIsRefusedLikeTheDevice) {
  const std::string link = dir_.File("zero.link");
  ASSERT_EQ(::symlink("/dev/zero", link.c_str()), 0);
  ExpectEveryReaderRefuses(link, "a character device");
}

TEST_F(HostileInputFiles, WholeFileOverItsLimitIsRefusedBeforeItIsRead) {
  for (const NamedReader& r : Readers()) {
    if (r.max_bytes == 0) continue;
    SCOPED_TRACE(r.name);
    // Sparse: no disk is used, and reading it would take seconds and the
    // limit's worth of memory. Over the limit by 4 bytes, so a multiple of 4
    // bytes is not the reason for a refusal.
    const std::string big = dir_.File("big.bin");
    const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t(r.max_bytes + 4)), 0);
    ::close(fd);
    const std::optional<std::string> result = ReadInChild(r.read, big, std::chrono::seconds(10));
    ASSERT_TRUE(result.has_value()) << r.name << " read an oversized file instead of refusing it";
    EXPECT_EQ(result->rfind("Invalid argument", 0), 0u) << *result;
    EXPECT_NE(result->find(big), std::string::npos) << *result;
    EXPECT_NE(result->find(std::to_string(r.max_bytes + 4) + " bytes is more than the limit of " +
                           std::to_string(r.max_bytes)),
              std::string::npos)
        << *result;
  }
}

TEST(ReadRegularFile, ReadsARegularFileWholeAndAnEmptyOne) {
  testing::TempDir dir;
  const std::string path = dir.File("f.txt");
  const std::string text(100000, 'x');
  {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(fileutil::WriteAll(fd, std::as_bytes(std::span(text)), path).ok());
    ::close(fd);
  }
  auto whole = fileutil::ReadRegularFile(path, text.size(), "test file");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(*whole, text);
  auto over = fileutil::ReadRegularFile(path, text.size() - 1, "test file");
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("test file " + path), std::string::npos) << over.status().ToString();

  const std::string empty = dir.File("empty");
  ::close(::open(empty.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  auto none = fileutil::ReadRegularFile(empty, 10, "test file");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, "");
  EXPECT_EQ(fileutil::ReadRegularFile(dir.File("missing"), 10, "test file").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace engram
