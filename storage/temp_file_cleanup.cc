#include "storage/temp_file_cleanup.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>

namespace engram {

namespace {

// A fixed table of paths, because the handler may only do async-signal-safe
// things: no allocation, no locks. A slot is published by storing kReady after
// its path is written, and retired by storing kFree.
// A rank conversion holds up to 24 finished rank tables, the temporary file
// of the one being written and its manifest's.
constexpr int kSlots = 64;
constexpr size_t kMaxPath = 4096;
constexpr int kFree = 0, kFilling = 1, kReady = 2;

struct Slot {
  std::atomic<int> state{kFree};
  char path[kMaxPath];
};
Slot g_slots[kSlots];

extern "C" void RemoveTempFilesAndDie(int sig) {
  const int saved_errno = errno;
  for (Slot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == kReady) ::unlink(slot.path);
  }
  errno = saved_errno;
  // SA_RESETHAND restored the default action; the signal is blocked while
  // this handler runs, so it is delivered (and kills) when the handler returns.
  ::raise(sig);
}

}  // namespace

int RegisterTempFile(const std::string& path) {
  if (path.empty() || path.size() >= kMaxPath) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (g_slots[i].state.compare_exchange_strong(expected, kFilling, std::memory_order_acq_rel)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].state.store(kReady, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void UnregisterTempFile(int token) {
  if (token < 0 || token >= kSlots) return;
  g_slots[token].state.store(kFree, std::memory_order_release);
}

void RemoveTempFilesOnTerminationSignals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = RemoveTempFilesAndDie;
    sa.sa_flags = SA_RESETHAND;
    // One cleanup at a time: the other termination signals wait for it.
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    ::sigaction(sig, &sa, nullptr);
  }
}

TerminationSignalsDeferred::TerminationSignalsDeferred() {
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  ::pthread_sigmask(SIG_BLOCK, &block, &previous_);
}

TerminationSignalsDeferred::~TerminationSignalsDeferred() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

}  // namespace engram
