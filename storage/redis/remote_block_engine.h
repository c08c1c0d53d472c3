// RemoteBlockEngine: an io::IoEngine whose one "file" is a table in a Redis
// Cluster (remote_table.h). A BlockRead at the table's data offset o is a
// GET of block (o - 4096) / 4096's key; the value lands in the read's buffer
// and the read's status says what happened to it: OK (4096 bytes, to be
// verified by the caller like any block read from a disk), NotFound (the key
// is missing), Corruption (a value of another size), Unavailable (its node
// cannot be reached, broke off, or did not answer in time), Cancelled
// (shutdown).
//
// So the store reads a remote table's misses through the same gather path as
// a file's (src/store/gather_operation.h): the same block batches, buffers,
// checksum check, failed-row bookkeeping and cache fill. A batch is handed to
// the cluster client's I/O thread, which pipelines each master's share on
// its connection; `done` runs there once every read has its status.
#pragma once

#include <memory>
#include <string>

#include "storage/io/io_engine.h"
#include "storage/io/io_stats.h"
#include "storage/redis/cluster_client.h"
#include "storage/redis/remote_table_keys.h"

namespace engram::redis {

class RemoteBlockEngine final : public io::IoEngine {
 public:
  // The table's blocks: `block_count` of them, under `keys`.
  RemoteBlockEngine(std::shared_ptr<ClusterClient> client, RemoteTableKeys keys, uint64_t block_count,
                    std::string name);
  ~RemoteBlockEngine() override;

  // The one file, the table: FileId 0.
  static constexpr io::FileId kTableFile = 0;

  io::IoBackend backend() const override { return io::IoBackend::kRedisCluster; }
  std::string Describe() const override;
  Result<io::FileId> OpenFile(const std::string& path) override;
  Status CloseFile(io::FileId) override { return Status::OK(); }
  Result<uint64_t> FileSize(io::FileId file) const override;
  void SubmitBatch(std::span<io::BlockRead> reads, io::IoCallback done) override;
  io::IoStatsSnapshot Stats() const override { return stats_.Snapshot(); }
  void Shutdown() override;

  // The table's name in the cluster.
  const std::string& table_name() const { return name_; }
  ClusterClient& client() { return *client_; }
  const ClusterClient& client() const { return *client_; }

 private:
  struct Batch;

  std::shared_ptr<ClusterClient> client_;
  const RemoteTableKeys keys_;
  const uint64_t block_count_;
  const std::string name_;
  io::IoStats stats_;
};

}  // namespace engram::redis
