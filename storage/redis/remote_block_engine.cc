#include "storage/redis/remote_block_engine.h"

#include <vector>

namespace engram::redis {

struct RemoteBlockEngine::Batch {
  std::span<io::BlockRead> reads;
  io::IoCallback done;
  uint64_t started_ns = 0;
  std::vector<std::string> keys;
  std::vector<ClusterCommand> commands;
  std::vector<uint32_t> read_of;  // read_of[c]: the read command c serves
};

RemoteBlockEngine::RemoteBlockEngine(std::shared_ptr<ClusterClient> client, RemoteTableKeys keys,
                                     uint64_t block_count, std::string name)
    : client_(std::move(client)), keys_(std::move(keys)), block_count_(block_count), name_(std::move(name)) {}

RemoteBlockEngine::~RemoteBlockEngine() { Shutdown(); }

std::string RemoteBlockEngine::Describe() const {
  std::string masters;
  for (const std::string& m : client_->Masters()) masters += (masters.empty() ? "" : ",") + m;
  return "redis-cluster(" + name_ + ", masters " + masters + ", pipeline " +
         std::to_string(client_->options().pipeline_depth) + ", timeout " +
         std::to_string(client_->options().timeout_ms) + " ms)";
}

Result<io::FileId> RemoteBlockEngine::OpenFile(const std::string& path) {
  return Status::Unsupported("a redis-cluster reader reads its own table, not '" + path + "'");
}

Result<uint64_t> RemoteBlockEngine::FileSize(io::FileId file) const {
  if (file != kTableFile) return Status::InvalidArgument("redis-cluster reader: no file " + std::to_string(file));
  return kTableDataOffset + block_count_ * kTableBlockSize;
}

void RemoteBlockEngine::SubmitBatch(std::span<io::BlockRead> reads, io::IoCallback done) {
  auto batch = std::make_unique<Batch>();
  batch->reads = reads;
  batch->done = std::move(done);
  batch->started_ns = io::MonotonicNanos();
  batch->keys.resize(reads.size());
  batch->commands.reserve(reads.size());
  batch->read_of.reserve(reads.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    io::BlockRead& r = reads[i];
    if (r.file != kTableFile || r.length != kTableBlockSize || r.offset < kTableDataOffset ||
        (r.offset - kTableDataOffset) % kTableBlockSize != 0) {
      r.status = Status::InvalidArgument("redis-cluster read of " + std::to_string(r.length) + " bytes at offset " +
                                         std::to_string(r.offset) + ": not one block of the table");
      continue;
    }
    const uint64_t block = (r.offset - kTableDataOffset) / kTableBlockSize;
    if (block >= block_count_) {
      r.status = Status::OutOfRange("redis-cluster read of block " + std::to_string(block) + " past the table's " +
                                    std::to_string(block_count_));
      continue;
    }
    keys_.Block(block, &batch->keys[i]);
    batch->commands.push_back(ClusterCommand::Get(batch->keys[i], std::span(r.dst, kTableBlockSize)));
    batch->read_of.push_back(static_cast<uint32_t>(i));
  }
  if (batch->commands.empty()) {
    for (const io::BlockRead& r : reads) stats_.RecordRead(r.status.code(), 0, 0);
    batch->done();
    return;
  }
  Batch* raw = batch.release();
  client_->Submit(raw->commands, [this, raw] {
    std::unique_ptr<Batch> owned(raw);
    const uint64_t latency = io::MonotonicNanos() - owned->started_ns;
    for (size_t c = 0; c < owned->commands.size(); ++c) {
      io::BlockRead& r = owned->reads[owned->read_of[c]];
      r.status = std::move(owned->commands[c].status);
      stats_.RecordRead(r.status.code(), r.status.ok() ? kTableBlockSize : 0, latency);
    }
    io::IoCallback done = std::move(owned->done);
    owned.reset();
    done();
  });
}

void RemoteBlockEngine::Shutdown() { client_->Shutdown(); }

}  // namespace engram::redis
