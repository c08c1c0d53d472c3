#include "src/store/block_batch.h"

#include <string>

#include "src/store/table_state.h"
#include "storage/log.h"

namespace engram {

void BlockBatch::Reset(size_t max_rows) {
  Clear();
  reads.reserve(max_rows);
  block_keys_.resize(max_rows);
  index_.Reset(max_rows);
}

void BlockBatch::Clear() {
  blocks.clear();
  rows.clear();
  row_ref.clear();
  row_block.clear();
  reads.clear();
  block_first_.clear();
  block_last_.clear();
  next_in_block_.clear();
}

void BlockBatch::Add(uint64_t row, uint32_t ref, const TableGeometry& g) {
  const auto k = static_cast<uint32_t>(rows.size());
  uint32_t count = static_cast<uint32_t>(blocks.size());
  const FirstAppearanceIndex::Found b = index_.Find(g.BlockOfRow(row), block_keys_.data(), count);
  if (b.added) {
    blocks.push_back(block_keys_[b.index]);
    block_first_.push_back(k);
    block_last_.push_back(k);
  } else {
    next_in_block_[block_last_[b.index]] = k;
    block_last_[b.index] = k;
  }
  rows.push_back(row);
  row_ref.push_back(ref);
  row_block.push_back(b.index);
  next_in_block_.push_back(kEnd);
}

Status BlockBatch::PrepareReads(io::FileId file, const TableGeometry& g, ReadBufferPool& pool, size_t end,
                                size_t ring_blocks) {
  if (!reads.empty() && end > reads.capacity()) {
    // Growing would move the reads the engine already holds.
    return Status::Internal("block batch: more reads than Reset made room for");
  }
  if (ring_blocks < end) {
    // Replaces the lease: only before any read into it is prepared.
    if (!reads.empty()) return Status::Internal("block batch: a ring lease after reads were prepared");
    ENGRAM_ASSIGN_OR_RETURN(buffers, pool.Acquire(ring_blocks));
  } else {
    ENGRAM_RETURN_IF_ERROR(pool.Extend(buffers, end));
  }
  for (size_t b = reads.size(); b < end; ++b) {
    reads.push_back(io::BlockRead{file, g.BlockOffset(blocks[b]), static_cast<uint32_t>(io::kBlockSize),
                                  buffers.Block(b), Status()});
  }
  return Status::OK();
}

Status BlockBatch::Build(const TableState& table, io::FileId file, ReadBufferPool& pool,
                         std::span<const std::pair<uint64_t, uint32_t>> rows_and_refs, size_t max_blocks) {
  const TableGeometry& g = table.file->geometry();
  Reset(rows_and_refs.size());
  for (const auto& [row, ref] : rows_and_refs) Add(row, ref, g);
  if (blocks.empty()) return Status::OK();
  return PrepareReads(file, g, pool, blocks.size(), max_blocks);
}

Status BlockBatch::Check(size_t b, TableState& table) const {
  TableCounters& c = table.counters;
  c.Add(c.io_reads, 1);
  Status s;
  if (!reads[b].status.ok()) {
    s = reads[b].status.WithContext("table " + table.name + " block " + std::to_string(blocks[b]));
    if (s.code() == StatusCode::kCancelled) {
      // The store is shutting down (IoEngine::Shutdown): its destructor says
      // how many reads that cut short.
      table.reads_cancelled_by_shutdown.fetch_add(1, std::memory_order_relaxed);
      return s;
    }
    c.Add(c.io_errors, 1);
  } else {
    c.Add(c.io_bytes, io::kBlockSize);
    s = table.file->VerifyBlock(blocks[b], Block(b));
    if (!s.ok()) c.Add(c.checksum_failures, 1);
  }
  if (!s.ok()) {
    LogRateLimiter::Decision d = table.block_error_log.Admit();
    if (d.log && d.suppressed > 0) {
      log::Error("table {}: {} ({} more block failures not logged since the last line; see the counters)",
                 table.name, s.ToString(), d.suppressed);
    } else if (d.log) {
      log::Error("table {}: {}", table.name, s.ToString());
    }
  }
  return s;
}

}  // namespace engram
