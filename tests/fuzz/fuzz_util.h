// Shared helpers of the libFuzzer targets in tests/fuzz/ (and of
// tests/fuzz_regression_test.cc, which replays their corpora and crash
// reproducers with GCC in the ordinary test suite).
//
// Each target is a function `int FuzzX(const uint8_t*, size_t)`; the file that
// defines it also defines LLVMFuzzerTestOneInput unless ENGRAM_FUZZ_NO_MAIN is
// set. A harness must never crash on any input: parsers answer with a Status.
// FUZZ_CHECK turns a broken invariant (e.g. a parser accepting what its own
// validation forbids) into an abort that libFuzzer reports.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define FUZZ_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "FUZZ_CHECK failed: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

namespace engram::fuzz {

// An in-memory file (memfd) reached through /proc/self/fd/N, so the readers
// that take a path (TableFile::Open, ReadRowTrace, ...) are fuzzed through
// their real code without touching the disk. Not thread-safe: one per target.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
    FUZZ_CHECK(fd_ >= 0);
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // Empties the file, then makes it `size` bytes long (sparse: holes read as zeros).
  void Reset(uint64_t size) {
    FUZZ_CHECK(::ftruncate(fd_, 0) == 0);
    FUZZ_CHECK(::ftruncate(fd_, static_cast<off_t>(size)) == 0);
  }
  void WriteAt(const void* data, size_t size, uint64_t offset) {
    if (size == 0) return;
    FUZZ_CHECK(::pwrite(fd_, data, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size));
  }
  // The file holds exactly these bytes.
  void Set(const void* data, size_t size) {
    Reset(0);
    WriteAt(data, size, 0);
  }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

// The input of the file-header targets (npy, safetensors): one control byte,
// then the file's first bytes. Control bit 0 asks the target to fix the
// header's length field (FixLengthField) so the fuzzer can work on the header
// text without keeping the length consistent; bits 1-7 add that many KiB of
// data after the input (the file size the parser checks offsets against).
struct HeaderInput {
  bool fix_length = false;
  std::vector<std::byte> bytes;  // the file's first bytes
  uint64_t file_size = 0;        // bytes plus the added KiB
};
inline HeaderInput SplitHeaderInput(const uint8_t* data, size_t size) {
  HeaderInput in;
  if (size < 1) return in;
  in.fix_length = (data[0] & 1) != 0;
  in.bytes.assign(reinterpret_cast<const std::byte*>(data + 1), reinterpret_cast<const std::byte*>(data + size));
  in.file_size = in.bytes.size() + static_cast<uint64_t>(data[0] >> 1) * 1024;
  return in;
}
// Writes, as a little-endian integer of `width` bytes at `offset`, the count of
// bytes after the field (the header is then exactly the rest of the input).
// No-op when the field does not fit.
inline void FixLengthField(std::vector<std::byte>& bytes, size_t offset, size_t width) {
  if (bytes.size() < offset + width) return;
  const uint64_t n = bytes.size() - offset - width;
  std::memcpy(bytes.data() + offset, &n, width);  // little-endian host
}

int FuzzTableFile(const uint8_t* data, size_t size);
int FuzzSafetensorsHeader(const uint8_t* data, size_t size);
int FuzzNpyHeader(const uint8_t* data, size_t size);
int FuzzHashLayout(const uint8_t* data, size_t size);
int FuzzTraceFiles(const uint8_t* data, size_t size);
int FuzzHttpRequest(const uint8_t* data, size_t size);

}  // namespace engram::fuzz

#ifndef ENGRAM_FUZZ_NO_MAIN
#define ENGRAM_FUZZ_TARGET(fn)                                                  \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {    \
    return ::engram::fuzz::fn(data, size);                                     \
  }
#else
#define ENGRAM_FUZZ_TARGET(fn)
#endif
