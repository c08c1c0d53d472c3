// PreadEngine: the portable backend. A pool of threads calling pread(2);
// works everywhere io_uring does not (old kernels, seccomp'd containers,
// kernel.io_uring_disabled). Synchronous ReadBlocks calls read in the calling
// thread (helped by the pool for multi-block batches).
#pragma once

#include <memory>

#include "storage/io/worker_pool_engine.h"

namespace engram::io {

class PreadEngine final : public WorkerPoolEngine {
 public:
  static Result<std::unique_ptr<IoEngine>> Create(const IoOptions& options);
  ~PreadEngine() override;

  IoBackend backend() const override { return IoBackend::kPread; }
  std::string Describe() const override;

 protected:
  Status ReadOne(const OpenedFile& file, const BlockRead& read) override;

 private:
  explicit PreadEngine(const IoOptions& options);
};

}  // namespace engram::io
