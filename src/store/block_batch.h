// BlockBatch: the 4 KiB blocks to read for a set of rows (a gather's misses,
// or a read-ahead), each row filed under its block, with the blocks' reads
// and the buffers they land in.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engram/status.h"
#include "src/store/first_appearance_index.h"
#include "src/store/read_buffer_pool.h"
#include "storage/io/io_engine.h"
#include "storage/table_format.h"

namespace engram {

struct TableState;

// Blocks to read for a set of rows, grouped by block. Blocks are in the
// order their first row appears in the input, so that a gather's reads land
// roughly in the order its misses are offered to the cache, and the cache
// can be filled while the later reads are still in flight. Rows can be added
// after the first blocks' reads were submitted (a gather submits each chunk
// of blocks as soon as its lookups have found that many): a later row of a
// block already being read joins that block's read.
struct BlockBatch {
  static constexpr uint32_t kEnd = UINT32_MAX;

  std::vector<uint64_t> blocks;     // distinct block indexes, by first appearance
  std::vector<uint64_t> rows;       // rows[k]: the k-th row added
  std::vector<uint32_t> row_ref;    // row_ref[k]: the caller's reference for it
  std::vector<uint32_t> row_block;  // row_block[k]: its block's index in blocks
  ReadBufferPool::Lease buffers;    // room for the blocks of `reads`
  // reads[b]: block b's read, for the blocks whose reads are prepared. Its
  // capacity is reserved by Reset and never grows: the engine holds pointers
  // into it while later reads are prepared.
  std::vector<io::BlockRead> reads;

  // Empties the batch for at most max_rows rows.
  void Reset(size_t max_rows);
  // Empties it, keeping the storage, for a Reset before its next use.
  void Clear();
  // Adds row `row` (with `ref`) as the next row; at most max_rows in all.
  void Add(uint64_t row, uint32_t ref, const TableGeometry& g);
  // Calls fn(k) for each row k of block b, in the order they were added.
  template <typename Fn>
  void ForEachRowOf(size_t b, Fn&& fn) const {
    for (uint32_t k = block_first_[b]; k != kEnd; k = next_in_block_[k]) fn(k);
  }
  // Prepares the reads of blocks [reads.size(), end), extending the lease;
  // or, if ring_blocks < end (then no read may be prepared yet), leases room
  // for ring_blocks blocks only: a ring the reads go through (see Lease).
  Status PrepareReads(io::FileId file, const TableGeometry& g, ReadBufferPool& pool, size_t end,
                      size_t ring_blocks = SIZE_MAX);
  // Reset, then adds rows[i] (with refs[i]) and prepares every block's read,
  // leasing buffers for at most `max_blocks` of them (a ring, see Lease).
  Status Build(const TableState& table, io::FileId file, ReadBufferPool& pool,
               std::span<const std::pair<uint64_t, uint32_t>> rows_and_refs, size_t max_blocks = SIZE_MAX);
  std::span<const std::byte> Block(size_t b) const { return {buffers.Block(b), io::kBlockSize}; }
  // Checks the read status and checksum of block b, counting failures.
  Status Check(size_t b, TableState& table) const;

 private:
  FirstAppearanceIndex index_;             // block -> its index in blocks
  std::vector<uint32_t> block_first_;      // block_first_[b]: its first row
  std::vector<uint32_t> block_last_;       // block_last_[b]: its last row so far
  std::vector<uint32_t> next_in_block_;    // next_in_block_[k]: the next row of k's block, or kEnd
  std::vector<uint64_t> block_keys_;       // the index's keys (blocks, with room for max_rows)
};

}  // namespace engram
