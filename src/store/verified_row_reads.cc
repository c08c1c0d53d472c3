#include "src/store/verified_row_reads.h"

#include <boost/asio/post.hpp>

#include <memory>
#include <utility>

#include "src/store/block_batch.h"
#include "src/store/reference_reads.h"
#include "src/store/store_impl.h"
#include "src/store/table_state.h"
#include "storage/log.h"

namespace engram {
namespace {

struct RowReads {
  StoreImpl* store;
  size_t table;
  LandRow land;
  std::function<void()> done;
};

// Ends reads that will read nothing -- the batch failed to build (`built`:
// its rows then land as failed) or needs no block -- and says whether it did.
bool EndWithoutReads(const RowReads& op, std::span<const uint64_t> rows, const Status& built, bool no_blocks,
                     const std::string& what) {
  if (!built.ok()) {
    log::Warn("{} on table {}: {}", what, op.store->table_state(op.table).name, built.ToString());
    for (uint64_t r : rows) op.land(r, false, {});
  }
  if (built.ok() && !no_blocks) return false;
  op.done();
  return true;
}

std::vector<std::pair<uint64_t, uint32_t>> RefsOf(std::span<const uint64_t> rows) {
  std::vector<std::pair<uint64_t, uint32_t>> refs;
  refs.reserve(rows.size());
  for (uint64_t r : rows) refs.emplace_back(r, 0);
  return refs;
}

struct BlockRowReads : RowReads {
  BlockBatch batch;
};

// On the completion pool: verify the landed blocks and land their rows.
void FinishBlockReads(const BlockRowReads& op) {
  TableState& t = op.store->table_state(op.table);
  const uint32_t record = t.file->record_bytes();
  const TableGeometry& g = t.file->geometry();
  for (size_t b = 0; b < op.batch.blocks.size(); ++b) {
    const bool ok = op.batch.Check(b, t).ok();  // a failure is counted; a later gather reads it again
    std::span<const std::byte> block = op.batch.Block(b);
    op.batch.ForEachRowOf(b, [&](uint32_t k) {
      const uint64_t row = op.batch.rows[k];
      op.land(row, ok, ok ? block.subspan(g.RowOffsetInBlock(row), record) : std::span<const std::byte>());
    });
  }
  op.done();
}

struct ReferenceRowReads : RowReads {
  ReferenceBatch batch;
};

// On the completion pool: verify the landed pieces and land the rows.
void FinishReferenceReads(ReferenceRowReads& op) {
  TableState& t = op.store->table_state(op.table);
  const uint32_t record = t.file->record_bytes();
  op.batch.ForEachRow(t, [&](uint64_t row, uint32_t, const Status& status, const std::byte* rec) {
    op.land(row, status.ok(), status.ok() ? std::span<const std::byte>(rec, record) : std::span<const std::byte>());
  });
  op.batch.blocks.buffers.Release();
  op.done();
}

}  // namespace

void ReadRowsVerified(StoreImpl* store, size_t table_index, std::vector<uint64_t> rows, const std::string& what,
                      LandRow land, std::function<void()> done) {
  TableState& table = store->table_state(table_index);
  if (table.file->is_reference()) {
    auto op = std::make_shared<ReferenceRowReads>();
    *static_cast<RowReads*>(op.get()) = {store, table_index, std::move(land), std::move(done)};
    Status s = op->batch.Build(table, store->read_buffers(), RefsOf(rows));
    if (EndWithoutReads(*op, rows, s, op->batch.blocks.blocks.empty(), what)) return;
    store->engine().SubmitBatch(op->batch.blocks.reads, [op] {
      boost::asio::post(op->store->completion_pool(), [op] { FinishReferenceReads(*op); });
    });
    return;
  }
  auto op = std::make_shared<BlockRowReads>();
  *static_cast<RowReads*>(op.get()) = {store, table_index, std::move(land), std::move(done)};
  Status s = op->batch.Build(table, table.file_id, store->read_buffers(), RefsOf(rows));
  if (EndWithoutReads(*op, rows, s, op->batch.blocks.empty(), what)) return;
  // The engine's completion thread only hands the blocks off.
  table.engine->SubmitBatch(op->batch.reads, [op] {
    boost::asio::post(op->store->completion_pool(), [op] { FinishBlockReads(*op); });
  });
}

}  // namespace engram
