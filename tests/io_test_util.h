// Helpers shared by the I/O engine tests: a temp file with known content on
// the real disk, written, fsync'ed and dropped from the page cache so reads
// really go to the device.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/io/aligned_buffer.h"
#include "storage/io/io_engine.h"

namespace engram::io::testing {

// The byte at file position `pos` of every test file: a hash so that a block
// read from the wrong offset, or shifted by any amount, never matches.
inline std::byte ExpectedByte(uint64_t pos) {
  uint64_t x = pos * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return static_cast<std::byte>(x >> 24);
}

class TempFile {
 public:
  // Creates `size` bytes of ExpectedByte content in a fresh directory under
  // $TMPDIR (or /tmp), then evicts it from the page cache.
  explicit TempFile(uint64_t size) : size_(size) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/engram-io-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    dir_ = buf.data();
    path_ = dir_ + "/data.bin";
    int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0);
    std::vector<std::byte> chunk(1 << 20);
    for (uint64_t pos = 0; pos < size;) {
      const uint64_t n = std::min<uint64_t>(chunk.size(), size - pos);
      for (uint64_t i = 0; i < n; ++i) chunk[i] = ExpectedByte(pos + i);
      EXPECT_EQ(::write(fd, chunk.data(), n), static_cast<ssize_t>(n));
      pos += n;
    }
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
