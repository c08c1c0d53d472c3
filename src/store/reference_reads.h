// Reads of reference tables (rows served in place from safetensors shards;
// storage/reference_table.h): the same cache, counters, readiness split,
// read buffers and I/O engine as a table of our own format, but a missed
// row's record is assembled from the aligned 4 KiB blocks holding its
// weight (and its scale, unless the scales are held in memory), each
// verified against the reference's stored checksum before any byte of it is
// copied or cached. A block that fails its read or its checksum fails only
// the rows that need it.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "engram/status.h"
#include "src/store/block_batch.h"
#include "src/store/table_state.h"
#include "storage/reference_layout.h"

namespace engram {

// The blocks and pieces of a batch of missed rows of one reference table.
struct ReferenceBatch {
  // The distinct checksum units to read (blocks.blocks, ascending) with their
  // reads and buffers; BlockBatch::Check counts and verifies them (through
  // TableFile::VerifyBlock, which checks a unit of a reference table).
  BlockBatch blocks;
  std::vector<uint64_t> rows;     // distinct row IDs
  std::vector<uint32_t> row_ref;  // the caller's reference of each row
  // kMaxRowPieces per row, piece_count[i] of them used; a piece's `unit` is
  // the index of its block in blocks.blocks.
  std::vector<RowPiece> pieces;
  std::vector<uint8_t> piece_count;
  std::vector<std::byte> records;  // assembled records, row i at i * record_bytes

  Status Build(const TableState& table, ReadBufferPool& pool, std::vector<std::pair<uint64_t, uint32_t>> rows_and_refs);

  // Once the reads have landed: checks every block (counting it), then calls
  // fn(row, ref, status, record) for each row: status OK and its assembled
  // record, or the failure of a block it needs and nullptr. Returns the bytes
  // of blocks read successfully.
  template <typename Fn>
  uint64_t ForEachRow(TableState& table, Fn&& fn);
};

// Store::Open: opens the shards of a reference table in the engine.
Status OpenReferenceShards(TableState& table, io::IoEngine& engine);

// Store::Open, after the budget split: holds the table's scale rows in memory
// if they need at most `share` of its cache budget (and takes them out of
// it). A scale block that fails its checksum leaves them on disk (logged):
// only the rows of that block then fail.
Status HoldReferenceScales(TableState& table, double share);

template <typename Fn>
uint64_t ReferenceBatch::ForEachRow(TableState& table, Fn&& fn) {
  static const Status kOk;
  const size_t n = blocks.blocks.size();
  std::vector<Status> status(n);
  uint64_t ok_bytes = 0;
  for (size_t b = 0; b < n; ++b) {
    status[b] = blocks.Check(b, table);
    if (status[b].ok()) ok_bytes += io::kBlockSize;
  }
  const uint32_t record = table.file->record_bytes();
  const uint32_t scale = record - table.file->reference()->layout().weight_row_bytes();
  const bool resident = !table.resident_scales.empty();
  records.resize(rows.size() * record);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::byte* rec = records.data() + i * record;
    const Status* failed = nullptr;
    for (int k = 0; k < piece_count[i] && failed == nullptr; ++k) {
      const RowPiece& p = pieces[i * kMaxRowPieces + k];
      if (!status[p.unit].ok()) {
        failed = &status[p.unit];
      } else {
        std::memcpy(rec + p.record_offset, blocks.Block(p.unit).data() + p.block_offset, p.bytes);
      }
    }
    if (failed == nullptr && resident && scale != 0) {
      std::memcpy(rec + (record - scale), table.resident_scales.data() + rows[i] * scale, scale);
    }
    fn(rows[i], row_ref[i], failed ? *failed : kOk, failed ? nullptr : static_cast<const std::byte*>(rec));
  }
  return ok_bytes;
}

}  // namespace engram
