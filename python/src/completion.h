// Completion<R>: a result handed over once from a store thread to Python.
//
// The store thread only locks a mutex, stores the result, wakes waiters and
// (if an asyncio loop is listening) writes an eventfd: it never touches the
// GIL, so a Python thread holding the GIL can never block it.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

namespace engram::python {

template <typename R>
class Completion {
 public:
  Completion() = default;
  Completion(const Completion&) = delete;
  ~Completion() {
    if (fd_ >= 0) ::close(fd_);
  }

  void Deliver(R result) {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(result);
    if (fd_ >= 0) {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(fd_, &one, sizeof(one));
    }
    cv_.notify_all();
  }

  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return result_.has_value();
  }

  // Blocks until delivered. Call without the GIL.
  R& Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return result_.has_value(); });
    return *result_;
  }

  // An eventfd that becomes readable on delivery, for an event loop's
  // add_reader; -1 if already delivered (or no eventfd could be made).
  int EventFd() {
    std::lock_guard<std::mutex> lock(mu_);
    if (result_.has_value()) return -1;
    if (fd_ < 0) fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return fd_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<R> result_;
  int fd_ = -1;
};

}  // namespace engram::python
