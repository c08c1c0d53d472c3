#include "storage/rank_converter.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <vector>

#include <xxhash.h>

#include "storage/embedded_hash_layout.h"
#include "storage/file_util.h"
#include "storage/input_files.h"
#include "storage/layout_json.h"
#include "storage/log.h"
#include "storage/rank_shard.h"
#include "storage/reference_layout.h"
#include "storage/reference_writer.h"
#include "storage/table_writer.h"
#include "storage/temp_file_cleanup.h"

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

// Generations a set's rank tables may be named by (RankTablePath); two take
// turns, the others are for manifests edited to name both.
constexpr uint32_t kGenerations = 4;

// Everything the rank tables of one conversion share.
struct RankPlan {
  EngramHashLayout layout;
  json layout_json;
  uint64_t source_rows = 0;
  uint32_t record_bytes = 0;
  RankManifest manifest;  // everything but the rank files' fingerprints
  // The set the manifest at the output path names now, if it reads as one:
  // it must keep opening until the new manifest is in place, and its rank
  // tables are removed after.
  std::optional<RankManifest> previous;
};

// Whether `path` is one of `files`: by name, or (both existing) the same file.
bool NamesOneOf(const std::string& path, const std::vector<RankFile>& files) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path normal = fs::absolute(path, ec).lexically_normal();
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  for (const RankFile& f : files) {
    if (fs::absolute(f.path, ec).lexically_normal() == normal) return true;
    struct stat other {};
    if (exists && ::stat(f.path.c_str(), &other) == 0 && other.st_dev == st.st_dev && other.st_ino == st.st_ino) {
      return true;
    }
  }
  return false;
}

// The first generation none of whose R rank table names is a file the
// previous manifest names: the new set never writes over the set that opens
// until its manifest is replaced.
Result<uint32_t> ChooseGeneration(const std::string& manifest_path, uint32_t ranks,
                                  const std::optional<RankManifest>& previous) {
  if (!previous) return 0;
  for (uint32_t g = 0; g < kGenerations; ++g) {
    bool free = true;
    for (uint32_t r = 0; r < ranks && free; ++r) {
      free = !NamesOneOf(RankTablePath(manifest_path, r, ranks, g), previous->rank_files);
    }
    if (free) return g;
  }
  return Status::InvalidArgument("the manifest " + manifest_path + " names rank tables of every generation of names (" +
                                 RankTablePath(manifest_path, 0, ranks, 0) + ", " +
                                 RankTablePath(manifest_path, 0, ranks, 1) +
                                 ", ...): a new set cannot be written beside it without replacing one of them");
}

// The rank tables a conversion writes, until its manifest is in place:
// registered for removal on SIGINT/SIGTERM/SIGHUP (storage/temp_file_cleanup.h)
// from before each is written (a signal in the instant between a table's
// rename and a later registration would leave it), and those written
// removed by the destructor unless Committed. So a conversion that fails or
// is interrupted leaves no rank table behind (and, written under new names,
// never touched the set the old manifest names). A signal before a table's
// rename removes what was at its name before: a file no manifest there
// names, which the rename would have replaced.
class UncommittedRankTables {
 public:
  UncommittedRankTables() = default;
  UncommittedRankTables(const UncommittedRankTables&) = delete;
  UncommittedRankTables& operator=(const UncommittedRankTables&) = delete;
  ~UncommittedRankTables() {
    for (const Entry& e : entries_) {
      if (!committed_ && e.written) ::unlink(e.path.c_str());
      UnregisterTempFile(e.token);
    }
  }
  // Before `path` is written.
  void Add(const std::string& path) { entries_.push_back({path, RegisterTempFile(path), false}); }
  // Once the table last added is in place.
  void Written() { entries_.back().written = true; }
  // Once the manifest naming them is in place: they stay.
  void Commit() {
    committed_ = true;
    for (Entry& e : entries_) {
      UnregisterTempFile(e.token);
      e.token = -1;
    }
  }

 private:
  struct Entry {
    std::string path;
    int token;
    bool written;
  };
  std::vector<Entry> entries_;
  bool committed_ = false;
};

// Checks the arguments and the outputs before anything is read or written:
// ranks, the layout against the source's rows, and that every output path
// can be written and is no input of the process (the caller holds the
// sources: HoldConvertSources, or the TableFile being split).
Result<RankPlan> PlanRanks(const std::optional<json>& layout_json, uint64_t source_rows, uint32_t record_bytes,
                           const std::string& manifest_path, const RankConvertOptions& options) {
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
  // The set the manifest names now, if any (one that does not read is no
  // set that opens, and is replaced like any file).
  struct stat st {};
  if (::stat(manifest_path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    if (auto previous = ReadRankManifest(manifest_path); previous.ok()) plan.previous = std::move(previous).value();
  }
  ENGRAM_ASSIGN_OR_RETURN(const uint32_t generation, ChooseGeneration(manifest_path, options.ranks, plan.previous));
  ENGRAM_RETURN_IF_ERROR(CheckOutputPath(manifest_path, "the rank manifest"));
  for (uint32_t r = 0; r < options.ranks; ++r) {
    ENGRAM_RETURN_IF_ERROR(CheckOutputPath(RankTablePath(manifest_path, r, options.ranks, generation), "rank table"));
  }
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
    f.path = RankTablePath(manifest_path, r, options.ranks, generation);
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

// Removes the rank tables of the set `previous` named, once the new manifest
// is in place: only files beside the manifest under a name a conversion of
// this manifest gives its rank tables (a manifest edited to name other files
// never has those removed), and none the new set names.
void RemovePreviousSet(const std::string& manifest_path, const RankManifest& previous, const RankManifest& current) {
  for (const RankFile& f : previous.rank_files) {
    bool ours = false;
    for (uint32_t g = 0; g < kGenerations && !ours; ++g) {
      ours = std::filesystem::path(RankTablePath(manifest_path, f.rank, previous.ranks, g)).filename() == f.file;
    }
    if (!ours || NamesOneOf(f.path, current.rank_files)) continue;
    if (::unlink(f.path.c_str()) != 0 && errno != ENOENT) {
      log::Warn("rank conversion: the previous set's rank table {} was not removed: {}", f.path, std::strerror(errno));
    }
  }
}

// Opens each written rank table (so it is checked as a reader will check
// it), records its fingerprint, and writes the manifest: the commit. The
// previous manifest, and the set it names, open as before until the new
// manifest is renamed over it; then the previous set's rank tables go.
Result<RankManifest> FinishManifest(RankPlan& plan, const std::string& manifest_path,
                                    const RankConvertOptions& options, UncommittedRankTables& written) {
  for (RankFile& f : plan.manifest.rank_files) {
    ENGRAM_ASSIGN_OR_RETURN(auto table, TableFile::Open(f.path));
    f.fingerprint = table->fingerprint();
  }
  {
    // A signal now is taken once the manifest is in place and the rank
    // tables are no longer registered for removal: never in between.
    TerminationSignalsDeferred deferred;
    ENGRAM_RETURN_IF_ERROR(fileutil::WriteFileAtomically(manifest_path,
                                                         RankManifestJson(plan.manifest).dump(2) + "\n",
                                                         "the rank manifest", options.convert.writer.sync));
    written.Commit();
  }
  if (plan.previous) RemovePreviousSet(manifest_path, *plan.previous, plan.manifest);
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

std::string RankTablePath(const std::string& manifest_path, uint32_t rank, uint32_t ranks, uint32_t generation) {
  return ManifestStem(manifest_path) + (generation == 0 ? "" : ".g" + std::to_string(generation)) + ".rank" +
         std::to_string(rank) + "-of-" + std::to_string(ranks) + ".engram";
}

Result<RankManifest> ConvertSpecToRanks(const ConvertSpec& spec, const std::string& manifest_path,
                                        const RankConvertOptions& options) {
  ENGRAM_ASSIGN_OR_RETURN(uint32_t record_bytes, ConvertRecordBytes(spec));
  uint64_t source_rows = 0;
  for (const TensorSlice& w : spec.weight) {
    if (__builtin_add_overflow(source_rows, w.tensor.rows(), &source_rows)) {
      return Status::InvalidArgument("total row count overflows 64 bits");
    }
  }
  if (options.in_place && spec.source_kind != "safetensors") {
    return Status::InvalidArgument("in-place rank tables reference safetensors shards, not " + spec.source_kind +
                                   " files");
  }
  const std::vector<InputFileHold> sources = HoldConvertSources(spec);
  ENGRAM_ASSIGN_OR_RETURN(RankPlan plan, PlanRanks(options.convert.hash_layout, source_rows, record_bytes,
                                                   manifest_path, options));
  UncommittedRankTables written;
  uint64_t rows_done = 0;
  if (options.in_place) {
    ConvertOptions copt = options.convert;
    for (uint32_t r = 0; r < plan.manifest.ranks; ++r) {
      const RankFile& f = plan.manifest.rank_files[r];
      const std::vector<ReferencePiece> pieces = PiecesOf(spec, SlotRowRanges(plan.layout, f.slots));
      copt.progress = [&](uint64_t done, uint64_t) {
        if (options.convert.progress) options.convert.progress(rows_done + done, source_rows);
      };
      written.Add(f.path);
      ENGRAM_RETURN_IF_ERROR(
          WriteReferenceTable(spec, pieces, f.path, copt, json{{"rank_shard", RankShardOf(plan, r)}}).status());
      written.Written();
      rows_done += f.rows;
    }
  } else {
    ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<SpecRecordReader> reader, SpecRecordReader::Open(spec));
    const json metadata = ConvertMetadata(spec, record_bytes, source_rows, options.convert);
    auto read = [&](uint64_t first, uint64_t n, std::byte* dst) { return reader->Read(first, n, dst); };
    for (uint32_t r = 0; r < plan.manifest.ranks; ++r) {
      written.Add(plan.manifest.rank_files[r].path);
      ENGRAM_RETURN_IF_ERROR(WriteCopiedRank(plan, r, metadata, read, options, rows_done));
      written.Written();
    }
  }
  return FinishManifest(plan, manifest_path, options, written);
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
  // The table and its shards are inputs while `table` is open.
  ENGRAM_ASSIGN_OR_RETURN(RankPlan plan,
                          PlanRanks(layout, table->row_count(), table->record_bytes(), manifest_path, options));
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
  UncommittedRankTables written;
  uint64_t rows_done = 0;
  for (uint32_t r = 0; r < plan.manifest.ranks; ++r) {
    written.Add(plan.manifest.rank_files[r].path);
    ENGRAM_RETURN_IF_ERROR(WriteCopiedRank(plan, r, metadata, read, options, rows_done));
    written.Written();
  }
  return FinishManifest(plan, manifest_path, options, written);
}

}  // namespace engram
