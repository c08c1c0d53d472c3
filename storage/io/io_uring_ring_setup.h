// Creating an io_uring ring with the best task-running flags the kernel
// accepts, shared by the engine's ring thread and callers' own rings.
#pragma once

#include <liburing.h>

namespace engram::io {

// io_uring_queue_init_params with SINGLE_ISSUER|DEFER_TASKRUN (completions
// run only when the owner waits for them: no interrupting task work), else
// COOP_TASKRUN, else no flags, stepping down only on EINVAL (an older
// kernel). The calling thread must be the only one that ever submits to the
// ring. Returns 0 or the negative errno of the last attempt; *flags_name
// names the flags that worked.
int InitRingWithBestFlags(unsigned entries, io_uring* ring, const char** flags_name);

}  // namespace engram::io
