// Block reads submitted and reaped by the calling thread on an io_uring ring
// of its own (IoEngine::RunReadStream on the io_uring engines).
//
// Through the engine, a read goes from the caller to the engine's ring
// thread (a queue and an eventfd), and its completion comes back through a
// callback and a wake-up: two more threads busy per gather, and a hand-off
// each way. Where cores are few, those cost more CPU than the read itself,
// and the device waits while the ring thread waits for a core. A caller that
// will wait for its reads anyway can instead submit them and reap them
// itself, checking each block as it lands, as fio does.
//
// One ring per thread, made on the thread's first stream and closed when the
// thread exits; under SINGLE_ISSUER only that thread may use it. A forked
// child makes a ring of its own rather than use the copy of its parent's. Any engine's
// streams share it: files are read by their plain descriptors (no fixed
// files or buffers, which belong to one ring).
#pragma once

#include <cstdint>

#include "storage/io/file_table.h"
#include "storage/io/io_engine.h"
#include "storage/io/io_stats.h"

namespace engram::io {

class FaultInjector;

// Runs `stream` on this thread's ring with at most `queue_depth` reads in
// flight (fewer if the ring was made smaller by an earlier stream), recording
// each read in `stats`; `faults` (testing, may be null) injects EAGAIN and
// short reads as on the engine's ring thread. Returns false, having asked the stream for nothing,
// if this thread has no ring and cannot make one; the failure is remembered
// (logged once per thread), so later calls return false at once. If the
// stream throws, every read already started is waited for (and none handed
// on) before the exception leaves: no read lands in a buffer after it.
bool RunReadStreamOnCallerRing(ReadStream& stream, const FileTable& files, uint32_t queue_depth,
                               uint32_t max_retries, FaultInjector* faults, IoStats& stats);

}  // namespace engram::io
