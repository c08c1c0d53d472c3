#include "storage/io/io_uring_ring_setup.h"

#include <cerrno>

#include "storage/log.h"

namespace engram::io {

int InitRingWithBestFlags(unsigned entries, io_uring* ring, const char** flags_name) {
  struct FlagSet {
    unsigned flags;
    const char* name;
  };
  static constexpr FlagSet kFlagSets[] = {
      {IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, "SINGLE_ISSUER|DEFER_TASKRUN"},
      {IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG, "COOP_TASKRUN"},
      {0, "no flags"},
  };
  int rc = -EINVAL;
  for (const FlagSet& set : kFlagSets) {
    io_uring_params params{};
    params.flags = set.flags;
    rc = io_uring_queue_init_params(entries, ring, &params);
    if (rc == 0) {
      *flags_name = set.name;
      return 0;
    }
    if (rc != -EINVAL) return rc;  // not a flags problem: no point stepping down
    log::Debug("io: io_uring_setup with {} refused (EINVAL); trying fewer flags", set.name);
  }
  return rc;
}

}  // namespace engram::io
