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

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

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
