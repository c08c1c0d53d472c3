// BackgroundWriter: writes one buffer at a time to a file on a helper thread,
// so the producer (generator, converter) fills the next buffer while the
// previous one goes to the kernel and the disk. Used by TableWriter with two
// buffers (double buffering).
//
// Not thread-safe itself: one producer thread calls Submit/Wait.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <thread>

#include "engram/status.h"
#include "storage/mutex.h"

namespace engram {

class BackgroundWriter {
 public:
  // early_writeback: after each write, ask the kernel to start writeback of
  // that range (sync_file_range), so a final fsync has little left to do.
  BackgroundWriter(int fd, std::string path, bool early_writeback);
  ~BackgroundWriter();  // waits for the write in flight, then stops the thread
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Waits for the previous write, then queues `data` for writing at `offset`.
  // `data` must stay valid and unchanged until the next Submit() or Wait()
  // returns. Returns the first error of any earlier write.
  Status Submit(std::span<const std::byte> data, uint64_t offset);

  // Waits until no write is in flight; returns the first error so far.
  Status Wait();

 private:
  void Run();

  const int fd_;
  const std::string path_;
  const bool early_writeback_;
  Mutex mu_;
  CondVar cv_;
  std::span<const std::byte> pending_ GUARDED_BY(mu_);
  uint64_t pending_offset_ GUARDED_BY(mu_) = 0;
  bool busy_ GUARDED_BY(mu_) = false;  // a write is queued or running
  bool stop_ GUARDED_BY(mu_) = false;
  Status error_ GUARDED_BY(mu_);       // first failure
  std::thread thread_;
};

}  // namespace engram
