// Helpers shared by the I/O engine tests: a temp file with known content on
// the real disk, written, fsync'ed and dropped from the page cache so reads
// really go to the device.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/io/aligned_buffer.h"
#include "storage/io/io_engine.h"

namespace engram::io::testing {

// Why an io_uring ring cannot be set up here (seccomp in containers,
// kernel.io_uring_disabled, ENGRAM_DISABLE_IO_URING), or "" where it can.
// Asked once per test binary.
inline const std::string& IoUringUnavailableReason() {
  static const std::string reason = [] {
    IoOptions o;
    o.backend = IoBackend::kIoUring;
    auto engine = CreateIoEngine(o);
    return engine.ok() ? std::string() : engine.status().ToString();
  }();
  return reason;
}
inline bool IoUringAvailable() { return IoUringUnavailableReason().empty(); }

// Skips the current test where io_uring is unavailable, saying why (as
// liburing's own tests do): the kernel's lack is not the store's failure.
#define ENGRAM_SKIP_WITHOUT_IO_URING()                                        \
  do {                                                                        \
    if (!::engram::io::testing::IoUringAvailable()) {                         \
      GTEST_SKIP() << "io_uring unavailable here: "                           \
                   << ::engram::io::testing::IoUringUnavailableReason();      \
    }                                                                         \
  } while (0)

// The byte at file position `pos` of every test file: a hash so that a block
// read from the wrong offset, or shifted by any amount, never matches.
inline std::byte ExpectedByte(uint64_t pos) {
  uint64_t x = pos * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return static_cast<std::byte>(x >> 24);
}

// ExpectedByte(0..size) materialized once, so checks are a memcmp (per-byte
// loops are slow under sanitizers). Grown only from TempFile's constructor,
// i.e. before any test thread reads it.
inline std::vector<std::byte>& ExpectedContent() {
  static std::vector<std::byte> content;
  return content;
}
inline void EnsureExpectedContent(uint64_t size) {
  std::vector<std::byte>& c = ExpectedContent();
  const uint64_t want = AlignUp(size, kBlockSize);
  for (uint64_t pos = c.size(); pos < want; ++pos) c.push_back(ExpectedByte(pos));
}

class TempFile {
 public:
  // Creates `size` bytes of ExpectedByte content in a fresh directory under
  // $TMPDIR (or /tmp), then evicts it from the page cache.
  explicit TempFile(uint64_t size) : size_(size) {
    EnsureExpectedContent(size);
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/engram-io-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    dir_ = buf.data();
    path_ = dir_ + "/data.bin";
    int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::write(fd, ExpectedContent().data(), size), static_cast<ssize_t>(size));
    EXPECT_EQ(::fsync(fd), 0);
    EXPECT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    ::close(fd);
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  uint64_t blocks() const { return AlignUp(size_, kBlockSize) / kBlockSize; }

 private:
  uint64_t size_;
  std::string dir_;
  std::string path_;
};

// Empty string if `read` (OK) holds the file's bytes; else a description of
// the first mismatch. Bytes past `file_size` must be zero.
inline std::string CheckBlock(const BlockRead& read, uint64_t file_size) {
  const std::vector<std::byte>& content = ExpectedContent();
  if (read.offset + read.length <= file_size && read.offset + read.length <= content.size() &&
      std::memcmp(read.dst, content.data() + read.offset, read.length) == 0) {
    return "";
  }
  for (uint32_t i = 0; i < read.length; ++i) {
    const uint64_t pos = read.offset + i;
    const std::byte want = pos < file_size ? ExpectedByte(pos) : std::byte{0};
    if (read.dst[i] != want) {
      return "offset " + std::to_string(read.offset) + " byte " + std::to_string(i) + ": got " +
             std::to_string(static_cast<int>(read.dst[i])) + " want " + std::to_string(static_cast<int>(want));
    }
  }
  return "";
}

// `count` reads of `blocks_per_read` blocks each at pseudo-random block
// offsets inside [0, file_blocks), with destinations carved from `arena`.
inline std::vector<BlockRead> RandomReads(FileId file, uint64_t file_blocks, size_t count, uint32_t blocks_per_read,
                                          AlignedBuffer& arena, uint64_t seed) {
  std::vector<BlockRead> reads(count);
  uint64_t x = seed;
  for (size_t i = 0; i < count; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t block = (x >> 33) % (file_blocks - blocks_per_read + 1);
    reads[i].file = file;
    reads[i].offset = block * kBlockSize;
    reads[i].length = blocks_per_read * kBlockSize;
    reads[i].dst = arena.data() + i * blocks_per_read * kBlockSize;
  }
  return reads;
}

}  // namespace engram::io::testing
