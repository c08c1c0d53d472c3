#include "storage/io/io_uring_caller_ring.h"

#include <liburing.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "storage/io/io_uring_read_result.h"
#include "storage/io/io_uring_ring_setup.h"
#include "storage/log.h"

namespace engram::io {
namespace {

// A ring's size when made: the store's default queue depth and then some, so
// one ring serves the usual depths; a deeper stream is capped at it.
constexpr uint32_t kMinRingEntries = 256;

// Forks so far, counted in each child: a ring made before a fork is the
// parent's, which the child must neither share nor (under SINGLE_ISSUER)
// submit to.
std::atomic<uint64_t> fork_generation{0};

void CountForkInChild() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

class CallerRing {
 public:
  ~CallerRing() {
    if (ready_) io_uring_queue_exit(&ring_);
  }

  // This thread's ring, made now if it has none; nullptr if it cannot be.
  io_uring* Get(uint32_t queue_depth) {
    static const int registered = pthread_atfork(nullptr, nullptr, CountForkInChild);
    (void)registered;
    const uint64_t generation = fork_generation.load(std::memory_order_relaxed);
    if (generation != generation_) {
      // A forked child: drop its copy of the parent's ring (its mapping and
      // descriptor only; the parent's ring is untouched) and make its own.
      if (ready_) io_uring_queue_exit(&ring_);
      ready_ = failed_ = false;
      generation_ = generation;
    }
    if (ready_) return &ring_;
    if (failed_) return nullptr;
    entries_ = std::bit_ceil(std::max(queue_depth, kMinRingEntries));
    const char* flags_name = "";
    const int rc = InitRingWithBestFlags(entries_, &ring_, &flags_name);
    if (rc != 0) {
      failed_ = true;
      log::Info("io: this thread's own io_uring ring could not be set up ({}); its reads go through the engine",
                std::strerror(-rc));
      return nullptr;
    }
    ready_ = true;
    return &ring_;
  }
  uint32_t entries() const { return entries_; }

 private:
  io_uring ring_{};
  bool ready_ = false;
  bool failed_ = false;
  uint32_t entries_ = 0;
  uint64_t generation_ = 0;  // fork_generation when the ring was made
};

thread_local CallerRing tls_ring;

// One read between its submission and its final status.
struct Slot {
  BlockRead* read = nullptr;
  const OpenedFile* file = nullptr;
  ReadProgress progress;
  uint64_t start_ns = 0;
};

// Every one of `depth` slots empty and on the free list (the last popped
// first).
void FreeAllSlots(uint32_t depth, std::vector<Slot>& slots, std::vector<uint32_t>& free_slots) {
  slots.assign(depth, Slot{});
  free_slots.clear();
  for (uint32_t i = depth; i-- > 0;) free_slots.push_back(i);
}

void PrepareRead(io_uring_sqe* sqe, const Slot& slot, uint32_t index) {
  const BlockRead& read = *slot.read;
  const uint32_t done = slot.progress.done;
  io_uring_prep_read(sqe, slot.file->fd, read.dst + done, read.length - done, read.offset + done);
  io_uring_sqe_set_data64(sqe, index);
}

}  // namespace

bool RunReadStreamOnCallerRing(ReadStream& stream, const FileTable& files, uint32_t queue_depth,
                               uint32_t max_retries, FaultInjector* faults, IoStats& stats) {
  io_uring* ring = tls_ring.Get(queue_depth);
  if (ring == nullptr) return false;
  const uint32_t depth = std::max<uint32_t>(1, std::min(queue_depth, tls_ring.entries()));
  // Per-thread scratch: a stream allocates nothing once its thread has run
  // one. Every slot is free again when a stream ends (nothing in flight), so
  // the free list is rebuilt only when the depth changes.
  thread_local std::vector<Slot> slots;
  thread_local std::vector<uint32_t> free_slots;
  thread_local std::vector<uint32_t> to_resubmit;
  if (slots.size() != depth) FreeAllSlots(depth, slots, free_slots);
  uint32_t in_flight = 0;
  unsigned walked = 0;  // CQEs of the current walk handed on and not yet released
  bool enter_failure_logged = false;

  try {
    for (;;) {
      // Remainders of short or retried reads first, then new reads while there
      // is room. An SQE is always available: at most `depth` (<= the ring's
      // entries) are outstanding.
      for (uint32_t i : to_resubmit) {
        PrepareRead(io_uring_get_sqe(ring), slots[i], i);
        ++in_flight;
      }
      to_resubmit.clear();
      uint64_t submit_ns = 0;  // one clock reading for the reads started this turn
      while (!free_slots.empty()) {
        BlockRead* read = stream.NextRead();
        if (read == nullptr) break;
        const OpenedFile* file = nullptr;
        read->status = files.Validate(*read, &file);
        if (!read->status.ok()) {
          stats.RecordRead(read->status.code(), 0, 0);
          stream.Finished(read);
          continue;
        }
        if (submit_ns == 0) submit_ns = MonotonicNanos();
        const uint32_t i = free_slots.back();
        free_slots.pop_back();
        slots[i] = Slot{read, file, ReadProgress{WantedBytes(*read, *file)}, submit_ns};
        PrepareRead(io_uring_get_sqe(ring), slots[i], i);
        ++in_flight;
      }
      if (in_flight == 0) return true;  // nothing started, nothing more to start

      const int rc = io_uring_submit_and_wait(ring, 1);
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
        // The SQEs stay queued and go in with the next call; reads already in
        // the kernel still complete. Pause rather than spin on a failing ring.
        if (!enter_failure_logged) log::Error("io: io_uring_enter on a caller's ring failed: {}", std::strerror(-rc));
        enter_failure_logged = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      // The CQ is walked in place, each landed read handed to the stream, and
      // released after: it has room for twice the reads that can be in flight.
      const uint64_t landed_ns = MonotonicNanos();
      unsigned head;
      io_uring_cqe* cqe;
      io_uring_for_each_cqe(ring, head, cqe) {
        ++walked;
        --in_flight;
        const auto i = static_cast<uint32_t>(cqe->user_data);
        Slot& slot = slots[i];
        const int res = InjectReadFaults(faults, *slot.read, slot.progress, cqe->res);
        Status status;
        if (ApplyReadResult(res, *slot.read, *slot.file, slot.progress, max_retries, /*stopping=*/false, stats,
                            &status) == ReadStep::kResubmit) {
          to_resubmit.push_back(i);
          continue;
        }
        stats.RecordRead(status.code(), slot.read->length, landed_ns - slot.start_ns);
        BlockRead* read = std::exchange(slot.read, nullptr);
        read->status = std::move(status);
        free_slots.push_back(i);
        stream.Finished(read);
      }
      io_uring_cq_advance(ring, std::exchange(walked, 0));
    }
  } catch (...) {
    // The stream threw (its Finished may run out of memory). The reads still
    // in the kernel would land in buffers that the unwinding frees: wait for
    // every one, hand none of them on, and leave every slot free for this
    // thread's next stream.
    io_uring_cq_advance(ring, std::exchange(walked, 0));
    while (in_flight != 0) {
      const int rc = io_uring_submit_and_wait(ring, 1);  // also starts the reads prepared but not submitted
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      unsigned head;
      io_uring_cqe* cqe;
      io_uring_for_each_cqe(ring, head, cqe) {
        ++walked;
        --in_flight;
      }
      io_uring_cq_advance(ring, std::exchange(walked, 0));
    }
    to_resubmit.clear();
    FreeAllSlots(depth, slots, free_slots);
    throw;
  }
}

}  // namespace engram::io
