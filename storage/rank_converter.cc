#include "storage/rank_converter.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <vector>

#include <xxhash.h>

#include "storage/embedded_hash_layout.h"
#include "storage/file_util.h"
#include "storage/layout_json.h"
#include "storage/rank_shard.h"
#include "storage/reference_layout.h"
#include "storage/reference_writer.h"
#include "storage/table_writer.h"

namespace engram {

using nlohmann::json;

namespace {

// Reads records [first_row, first_row + count) of the source into dst.
using ReadRecordsFn = std::function<Status(uint64_t first_row, uint64_t count, std::byte* dst)>;

std::string ManifestStem(const std::string& manifest_path) {
  const std::string suffix = ".json";
  if (manifest_path.size() > suffix.size() && manifest_path.ends_with(suffix)) {
    return manifest_path.substr(0, manifest_path.size() - suffix.size());
  }
  return manifest_path;
}

// Everything the rank tables of one conversion share.
struct RankPlan {
  EngramHashLayout layout;
  json layout_json;
  uint64_t source_rows = 0;
  uint32_t record_bytes = 0;
  RankManifest manifest;  // everything but the rank files' fingerprints
};

// Checks the arguments and the outputs before anything is read or written:
// ranks, the layout against the source's rows, and that every output path
// can be written and is not an input.
Result<RankPlan> PlanRanks(const std::optional<json>& layout_json, uint64_t source_rows, uint32_t record_bytes,
                           const std::string& manifest_path, const std::vector<std::string>& inputs,
                           const RankConvertOptions& options) {
  if (options.ranks < 1 || options.ranks > kMaxRanks) {
    return Status::InvalidArgument("--ranks " + std::to_string(options.ranks) + " is outside 1.." +
                                   std::to_string(kMaxRanks));
  }
  if (!layout_json) {
    return Status::InvalidArgument(
        "rank tables need the layer's hash layout (to know each slot's rows): give --layout FILE --layer ID, or "
        "convert a table that embeds one");
  }
  RankPlan plan;
  ENGRAM_RETURN_IF_ERROR(ValidateHashLayout(*layout_json, source_rows));
  ENGRAM_ASSIGN_OR_RETURN(plan.layout, LayoutFromJson(*layout_json));
  plan.layout_json = *layout_json;
  plan.source_rows = source_rows;
  plan.record_bytes = record_bytes;
  const uint32_t slot_count = plan.layout.rows_per_token();
  const uint32_t max_ranks = std::min(kMaxRanks, slot_count);
  if (options.ranks > max_ranks) {
    return Status::InvalidArgument("--ranks " + std::to_string(options.ranks) + " is outside 1.." +
                                   std::to_string(max_ranks) + " (the layer has " + std::to_string(slot_count) +
                                   " slots)");
  }
  std::vector<std::string> outputs = {manifest_path};
  for (uint32_t r = 0; r < options.ranks; ++r) outputs.push_back(RankTablePath(manifest_path, r, options.ranks));
  for (const std::string& out : outputs) ENGRAM_RETURN_IF_ERROR(CheckConvertOutput(out, inputs));
  const std::string dir = DirectoryOf(manifest_path);
  if (::access(dir.empty() ? "." : dir.c_str(), W_OK | X_OK) != 0) {
    return Status::InvalidArgument("cannot write the rank tables and manifest in '" + (dir.empty() ? "." : dir) +
                                   "': " + std::strerror(errno));
  }

  RankManifest& m = plan.manifest;
  // Random unless the checksum salt is fixed (byte-identical reruns).
  const uint64_t salt = options.convert.writer.checksum_salt ? *options.convert.writer.checksum_salt
                                                             : RandomChecksumSalt();
  const uint64_t seed[3] = {salt, source_rows, options.ranks};
  m.manifest_id = XXH3_64bits(seed, sizeof seed);
  m.name = std::filesystem::path(ManifestStem(manifest_path)).filename().string();
  m.ranks = options.ranks;
  m.slot_count = slot_count;
  for (uint32_t s = 0; s < slot_count; ++s) {
    m.slot_to_rank.push_back(s % options.ranks);
    m.slot_index_in_rank.push_back(s / options.ranks);
  }
  m.source_rows = source_rows;
  m.record_bytes = record_bytes;
  m.hash_layout = *layout_json;
  for (uint32_t r = 0; r < options.ranks; ++r) {
    RankFile f;
    f.rank = r;
    f.path = RankTablePath(manifest_path, r, options.ranks);
    f.file = std::filesystem::path(f.path).filename().string();
    f.slots = StridedSlots(slot_count, options.ranks, r);
    for (const SlotRows& range : SlotRowRanges(plan.layout, f.slots)) f.rows += range.rows;
    m.rank_files.push_back(std::move(f));
  }
  return plan;
}

json RankShardOf(const RankPlan& plan, uint32_t rank) {
  const RankFile& f = plan.manifest.rank_files[rank];
  return RankShardJson({plan.manifest.ranks, rank, f.slots, plan.manifest.manifest_id, plan.source_rows});
}

// Copies the rank's slot ranges from `read` into a new table at f.path.
Status WriteCopiedRank(const RankPlan& plan, uint32_t rank, json metadata, const ReadRecordsFn& read,
                       const RankConvertOptions& options, uint64_t& rows_done) {
  const RankFile& f = plan.manifest.rank_files[rank];
  metadata["rows"] = f.rows;
  metadata["hash_layout"] = plan.layout_json;
  metadata["rank_shard"] = RankShardOf(plan, rank);
  TableWriterOptions wopt = options.convert.writer;
  wopt.record_bytes = plan.record_bytes;
  wopt.metadata = std::move(metadata);
  ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<TableWriter> writer, TableWriter::Create(f.path, std::move(wopt)));
  const uint64_t chunk_rows = std::max<uint64_t>(1, options.convert.chunk_bytes / plan.record_bytes);
  std::vector<std::byte> buffer;
  const uint64_t total = plan.source_rows;
  for (const SlotRows& range : SlotRowRanges(plan.layout, f.slots)) {
    for (uint64_t done = 0; done < range.rows;) {
      const uint64_t n = std::min(chunk_rows, range.rows - done);
      buffer.resize(n * plan.record_bytes);
      ENGRAM_RETURN_IF_ERROR(read(range.first_row + done, n, buffer.data()));
      ENGRAM_RETURN_IF_ERROR(writer->AppendRecords(buffer));
      done += n;
      rows_done += n;
      if (options.convert.progress) options.convert.progress(rows_done, total);
    }
  }
  return writer->Finish();
}

// The rank's slot ranges as pieces of the spec's shards.
std::vector<ReferencePiece> PiecesOf(const ConvertSpec& spec, const std::vector<SlotRows>& ranges) {
  std::vector<ReferencePiece> pieces;
  for (const SlotRows& range : ranges) {
    uint64_t row = range.first_row, left = range.rows, shard_first = 0;
    for (size_t i = 0; i < spec.weight.size() && left > 0; ++i) {
      const uint64_t rows = spec.weight[i].tensor.rows();
      if (row < shard_first + rows) {
        const uint64_t n = std::min(left, shard_first + rows - row);
        pieces.push_back({i, row - shard_first, n});
        row += n;
        left -= n;
      }
      shard_first += rows;
    }
  }
  return pieces;
}

// Opens each written rank table (so it is checked as a reader will check
// it), records its fingerprint, and writes the manifest.
Result<RankManifest> FinishManifest(RankPlan& plan, const std::string& manifest_path,
                                    const RankConvertOptions& options) {
  for (RankFile& f : plan.manifest.rank_files) {
    ENGRAM_ASSIGN_OR_RETURN(auto table, TableFile::Open(f.path));
    f.fingerprint = table->fingerprint();
  }
  ENGRAM_RETURN_IF_ERROR(fileutil::WriteFileAtomically(manifest_path, RankManifestJson(plan.manifest).dump(2) + "\n",
                                                       options.convert.writer.sync));
  return plan.manifest;
}

// A table's records, verified block by block.
Status ReadTableRecords(const TableFile& table, uint64_t first_row, uint64_t count, std::byte* dst) {
  const uint32_t rb = table.record_bytes();
  if (table.is_reference()) {
    for (uint64_t k = 0; k < count; ++k) {
      ENGRAM_RETURN_IF_ERROR(table.ReadRow(first_row + k, std::span(dst + k * rb, rb)));
    }
    return Status::OK();
  }
  alignas(64) std::byte block[kTableBlockSize];
  for (uint64_t row = first_row, end = first_row + count; row < end;) {
    const uint64_t b = table.BlockOfRow(row);
    ENGRAM_RETURN_IF_ERROR(table.ReadBlock(b, block));
    const uint64_t block_end = std::min(end, (b + 1) * uint64_t{table.rows_per_block()});
    const uint64_t n = block_end - row;
    std::memcpy(dst + (row - first_row) * rb, block + table.RowOffsetInBlock(row), n * rb);
    row += n;
  }
  return Status::OK();
}

}  // namespace

std::string RankTablePath(const std::string& manifest_path, uint32_t rank, uint32_t ranks) {
  return ManifestStem(manifest_path) + ".rank" + std::to_string(rank) + "-of-" + std::to_string(ranks) + ".engram";
}

Result<RankManifest> ConvertSpecToRanks(const ConvertSpec& spec, const std::string& manifest_path,
                                        const RankConvertOptions& options) {
  ENGRAM_ASSIGN_OR_RETURN(uint32_t record_bytes, ConvertRecordBytes(spec));
  uint64_t source_rows = 0;
  std::vector<std::string> inputs;
  for (const TensorSlice& w : spec.weight) {
    if (__builtin_add_overflow(source_rows, w.tensor.rows(), &source_rows)) {
      return Status::InvalidArgument("total row count overflows 64 bits");
    }
    inputs.push_back(w.path);
  }
  for (const TensorSlice& s : spec.scale) inputs.push_back(s.path);
  if (options.in_place && spec.source_kind != "safetensors") {
    return Status::InvalidArgument("in-place rank tables reference safetensors shards, not " + spec.source_kind +
                                   " files");
  }
  ENGRAM_ASSIGN_OR_RETURN(RankPlan plan, PlanRanks(options.convert.hash_layout, source_rows, record_bytes,
                                                   manifest_path, inputs, options));
  uint64_t rows_done = 0;
  if (options.in_place) {
    ConvertOptions copt = options.convert;
    for (uint32_t r = 0; r < plan.manifest.ranks; ++r) {
      const RankFile& f = plan.manifest.rank_files[r];
      const std::vector<ReferencePiece> pieces = PiecesOf(spec, SlotRowRanges(plan.layout, f.slots));
      copt.progress = [&](uint64_t done, uint64_t) {
        if (options.convert.progress) options.convert.progress(rows_done + done, source_rows);
      };
      ENGRAM_RETURN_IF_ERROR(
          WriteReferenceTable(spec, pieces, f.path, copt, json{{"rank_shard", RankShardOf(plan, r)}}).status());
      rows_done += f.rows;
    }
  } else {
    ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<SpecRecordReader> reader, SpecRecordReader::Open(spec));
    const json metadata = ConvertMetadata(spec, record_bytes, source_rows, options.convert);
    auto read = [&](uint64_t first, uint64_t n, std::byte* dst) { return reader->Read(first, n, dst); };
    for (uint32_t r = 0; r < plan.manifest.ranks; ++r) {
      ENGRAM_RETURN_IF_ERROR(WriteCopiedRank(plan, r, metadata, read, options, rows_done));
    }
  }
  return FinishManifest(plan, manifest_path, options);
}

Result<RankManifest> ConvertTableToRanks(const std::string& table_path, const std::string& manifest_path,
                                         const RankConvertOptions& options) {
  if (options.in_place) {
    return Status::InvalidArgument("in-place rank tables are made from safetensors shards, not from a table");
  }
  ENGRAM_ASSIGN_OR_RETURN(auto table, TableFile::Open(table_path));
  if (table->rank_shard() != nullptr) {
    return Status::InvalidArgument(table_path + " is already a rank table (rank " +
                                   std::to_string(table->rank_shard()->rank) + " of " +
                                   std::to_string(table->rank_shard()->ranks) + "); convert the unsharded table");
  }
  static constexpr std::string_view kKeys[] = {"record", "source", "hash_layout"};
  ENGRAM_ASSIGN_OR_RETURN(json members, table->MetadataMembers(kKeys));
  std::optional<json> layout = options.convert.hash_layout;
  if (!layout && members.contains("hash_layout")) layout = members["hash_layout"];
  std::vector<std::string> inputs = {table_path};
  if (table->is_reference()) {
    for (const ReferenceShard& s : table->reference()->shards()) inputs.push_back(s.path);
  }
  ENGRAM_ASSIGN_OR_RETURN(RankPlan plan, PlanRanks(layout, table->row_count(), table->record_bytes(), manifest_path,
                                                   inputs, options));
  json metadata;
  metadata["format"] = "engram-table/1";
  metadata["record"] = members.contains("record") ? members["record"] : json{{"bytes", table->record_bytes()}};
  json source = {{"kind", "engram-table"},
                 {"file", std::filesystem::path(table_path).filename().string()},
                 {"fingerprint", Hex64(table->fingerprint())}};
  if (members.contains("source")) source["source"] = members["source"];
  metadata["source"] = std::move(source);
  metadata["created_by"] = options.convert.created_by;
  auto read = [&](uint64_t first, uint64_t n, std::byte* dst) { return ReadTableRecords(*table, first, n, dst); };
  uint64_t rows_done = 0;
  for (uint32_t r = 0; r < plan.manifest.ranks; ++r) {
    ENGRAM_RETURN_IF_ERROR(WriteCopiedRank(plan, r, metadata, read, options, rows_done));
  }
  return FinishManifest(plan, manifest_path, options);
}

}  // namespace engram
