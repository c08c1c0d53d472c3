#include "src/store/reference_reads.h"

#include <algorithm>
#include <string>

#include "storage/log.h"

namespace engram {

Status ReferenceBatch::Build(const TableState& table, ReadBufferPool& pool,
                             std::vector<std::pair<uint64_t, uint32_t>> rows_and_refs) {
  const ReferenceLayout& layout = table.file->reference()->layout();
  const bool with_scale = table.resident_scales.empty();
  const size_t n = rows_and_refs.size();
  rows.resize(n);
  row_ref.resize(n);
  pieces.resize(n * kMaxRowPieces);
  piece_count.resize(n);
  std::vector<uint64_t>& units = blocks.blocks;
  units.clear();
  for (size_t i = 0; i < n; ++i) {
    rows[i] = rows_and_refs[i].first;
    row_ref[i] = rows_and_refs[i].second;
    RowPiece* p = &pieces[i * kMaxRowPieces];
    piece_count[i] = static_cast<uint8_t>(layout.RowPieces(rows[i], with_scale, p));
    for (int k = 0; k < piece_count[i]; ++k) units.push_back(p[k].unit);
  }
  std::sort(units.begin(), units.end());
  units.erase(std::unique(units.begin(), units.end()), units.end());
  for (size_t i = 0; i < n; ++i) {
    for (int k = 0; k < piece_count[i]; ++k) {
      RowPiece& p = pieces[i * kMaxRowPieces + k];
      p.unit = static_cast<uint64_t>(std::lower_bound(units.begin(), units.end(), p.unit) - units.begin());
    }
  }
  if (units.empty()) return Status::OK();
  ENGRAM_ASSIGN_OR_RETURN(blocks.buffers, pool.Acquire(units.size()));
  blocks.reads.resize(units.size());
  for (size_t b = 0; b < units.size(); ++b) {
    const ChecksumUnit u = layout.Unit(units[b]);
    blocks.reads[b] = io::BlockRead{table.shard_files[u.shard], u.file_offset, static_cast<uint32_t>(io::kBlockSize),
                                    blocks.buffers.Block(b), Status()};
  }
  return Status::OK();
}

Status OpenReferenceShards(TableState& table, io::IoEngine& engine) {
  for (const ReferenceShard& s : table.file->reference()->shards()) {
    auto fid = engine.OpenFile(s.path);
    if (!fid.ok()) return fid.status().WithContext("open shard of table " + table.file->path());
    table.shard_files.push_back(*fid);
  }
  return Status::OK();
}

Status HoldReferenceScales(TableState& table, double share) {
  if (!(share >= 0.0 && share <= 1.0)) {
    return Status::InvalidArgument("store: in_place_scale_share must be in [0, 1], got " + std::to_string(share));
  }
  const ReferenceTable* ref = table.file->reference();
  if (ref == nullptr || ref->layout().scale_row_bytes() == 0) return Status::OK();
  const uint64_t bytes = ref->layout().row_count() * ref->layout().scale_row_bytes();
  if (share == 0.0 || static_cast<double>(bytes) > share * static_cast<double>(table.cache_budget_bytes)) {
    log::Info("store: table {}: scales ({} B) read with each missed row", table.name, bytes);
    return Status::OK();
  }
  table.resident_scales.resize(bytes);
  Status s = ref->ReadScales(table.resident_scales);
  if (!s.ok()) {
    std::vector<std::byte>().swap(table.resident_scales);
    log::Warn("store: table {}: scales stay on disk, read with each missed row: {}", table.name, s.ToString());
    return Status::OK();
  }
  table.cache_budget_bytes -= bytes;
  log::Info("store: table {}: scales held in memory ({} B of the cache budget)", table.name, bytes);
  return Status::OK();
}

}  // namespace engram
