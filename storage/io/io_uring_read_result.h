// What one CQE means for a block read: the rules both io_uring paths share
// (the engine's ring thread and a caller's own ring, io_uring_caller_ring.h),
// so a retry, a short read or the end of a file is handled the same way
// whichever thread reaps it.
#pragma once

#include <cstdint>

#include "engram/status.h"
#include "storage/io/file_table.h"
#include "storage/io/io_engine.h"
#include "storage/io/io_stats.h"

namespace engram::io {

class FaultInjector;

// How far one block read has got between its submissions.
struct ReadProgress {
  uint32_t wanted = 0;   // bytes before end-of-file; the rest of the block is zero-filled
  uint32_t done = 0;     // bytes transferred so far
  uint32_t retries = 0;  // EAGAIN / EINTR resubmissions so far
};

// Bytes of `read` that lie before the end of `file` (the rest reads as zeros).
uint32_t WantedBytes(const BlockRead& read, const OpenedFile& file);

enum class ReadStep : uint8_t {
  kComplete,  // *status is the read's final status
  kResubmit,  // submit what is left of the read again (from progress.done on)
};

// Applies the result `res` of a read's CQE. A short read or EAGAIN/EINTR asks
// for a resubmission, unless `stopping` (then the read ends Cancelled) or the
// retries are used up. A read complete to the end of the file has the rest of
// its block zero-filled. Retries and short reads are counted in `stats`; the
// final read is not (the caller records it with its latency).
ReadStep ApplyReadResult(int res, const BlockRead& read, const OpenedFile& file, ReadProgress& progress,
                         uint32_t max_retries, bool stopping, IoStats& stats, Status* status);

// The result `res` of a read's CQE as a testing FaultInjector would have it:
// EAGAIN or a short read in place of a successful transfer (unchanged without
// an injector, or for a failed read).
int InjectReadFaults(FaultInjector* faults, const BlockRead& read, const ReadProgress& progress, int res);

// The status of a read the engine cancelled because it is shutting down.
Status ShutdownCancelledStatus();

}  // namespace engram::io
