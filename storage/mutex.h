// Mutex, MutexLock and CondVar: std::mutex, a lock guard and
// std::condition_variable, annotated for Clang's thread-safety analysis
// (storage/thread_annotations.h). Shared state that names its mutex in
// GUARDED_BY is locked through these, so the compiler checks every access.
// They cost exactly what the std types they wrap cost.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "storage/thread_annotations.h"

namespace engram {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope. Unlock and Lock let a scope drop the lock
// around work that must run without it and take it back.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A condition variable waited on with a Mutex held, as
// std::condition_variable with a std::unique_lock. Callers loop on their
// condition (`while (!ready) cv.Wait(&mu);`) in the function that holds
// the lock, so the analysis sees the guarded reads.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases mu while it waits; holds it again when it returns.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // As Wait, but returns at `deadline` at the latest.
  template <typename Clock, typename Duration>
  void WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait_until(lock, deadline);
    lock.release();
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace engram
