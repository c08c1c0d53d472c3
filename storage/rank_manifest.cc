#include "storage/rank_manifest.h"

#include <cstring>

#include "storage/bounded_json.h"
#include "storage/embedded_hash_layout.h"
#include "storage/file_util.h"
#include "storage/json_fields.h"
#include "storage/layout_json.h"
#include "storage/rank_shard.h"
#include "storage/reference_layout.h"

namespace engram {

using nlohmann::json;

namespace {

Status Bad(const std::string& what) { return Status::Corruption("rank manifest: " + what); }

constexpr std::string_view kWhat = "rank manifest";

Result<std::vector<uint32_t>> U32List(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) return Bad(where + " has no \"" + key + "\" array");
  std::vector<uint32_t> out;
  for (const json& v : *it) {
    if (!IsU64(v) || v.get<uint64_t>() > UINT32_MAX) return Bad(where + " \"" + key + "\" holds " + v.dump());
    out.push_back(v.get<uint32_t>());
  }
  return out;
}

Result<RankManifest> ParseManifest(const json& m, const std::string& dir) {
  if (!m.is_object()) return Bad("is not a JSON object");
  if (!m.contains("format") || m["format"] != kRankManifestFormat) {
    return Bad(std::string("\"format\" is not \"") + kRankManifestFormat + "\"");
  }
  RankManifest out;
  ENGRAM_ASSIGN_OR_RETURN(out.manifest_id, Hex64Field(m, "manifest_id", "the manifest", kWhat));
  if (!m.contains("name") || !m["name"].is_string() || m["name"].get<std::string>().empty()) {
    return Bad("has no \"name\"");
  }
  out.name = m["name"].get<std::string>();
  ENGRAM_ASSIGN_OR_RETURN(out.source_rows, U64Field(m, "source_rows", "the manifest", kWhat));
  if (!m.contains("hash_layout")) return Bad("has no \"hash_layout\"");
  out.hash_layout = m["hash_layout"];
  if (Status s = ValidateHashLayout(out.hash_layout, out.source_rows); !s.ok()) return Bad(s.message());
  ENGRAM_ASSIGN_OR_RETURN(EngramHashLayout layout, LayoutFromJson(out.hash_layout));
  ENGRAM_ASSIGN_OR_RETURN(uint64_t slot_count, U64Field(m, "slot_count", "the manifest", kWhat));
  if (slot_count != layout.rows_per_token()) {
    return Bad("slot_count " + std::to_string(slot_count) + " but the layout has " +
               std::to_string(layout.rows_per_token()) + " slots");
  }
  out.slot_count = layout.rows_per_token();
  ENGRAM_ASSIGN_OR_RETURN(uint64_t ranks, U64Field(m, "ranks", "the manifest", kWhat));
  if (ranks < 1 || ranks > kMaxRanks || ranks > out.slot_count) {
    return Bad("ranks " + std::to_string(ranks) + " is outside 1.." +
               std::to_string(std::min(kMaxRanks, out.slot_count)));
  }
  out.ranks = static_cast<uint32_t>(ranks);
  if (!m.contains("assignment") || m["assignment"] != kStridedAssignment) {
    return Bad(std::string("\"assignment\" is not \"") + kStridedAssignment + "\"");
  }
  ENGRAM_ASSIGN_OR_RETURN(uint64_t record_bytes, U64Field(m, "record_bytes", "the manifest", kWhat));
  if (record_bytes == 0 || record_bytes > kMaxRecordBytes) {
    return Bad("record_bytes " + std::to_string(record_bytes) + " is out of range");
  }
  out.record_bytes = static_cast<uint32_t>(record_bytes);
  ENGRAM_ASSIGN_OR_RETURN(out.slot_to_rank, U32List(m, "slot_to_rank", "the manifest"));
  ENGRAM_ASSIGN_OR_RETURN(out.slot_index_in_rank, U32List(m, "slot_index_in_rank", "the manifest"));
  for (uint32_t s = 0; s < out.slot_count; ++s) {
    if (out.slot_to_rank.size() != out.slot_count || out.slot_index_in_rank.size() != out.slot_count ||
        out.slot_to_rank[s] != s % out.ranks || out.slot_index_in_rank[s] != s / out.ranks) {
      return Bad("slot_to_rank and slot_index_in_rank are not the strided maps for " + std::to_string(ranks) +
                 " ranks (s % R and s // R for each of the " + std::to_string(out.slot_count) + " slots)");
    }
  }
  auto files = m.find("rank_files");
  if (files == m.end() || !files->is_array() || files->size() != out.ranks) {
    return Bad("has no \"rank_files\" array of " + std::to_string(ranks) + " entries");
  }
  for (uint32_t r = 0; r < out.ranks; ++r) {
    const std::string where = "rank_files[" + std::to_string(r) + "]";
    const json& e = (*files)[r];
    if (!e.is_object()) return Bad(where + " is not an object");
    RankFile f;
    ENGRAM_ASSIGN_OR_RETURN(uint64_t rank, U64Field(e, "rank", where, kWhat));
    if (rank != r) return Bad(where + " is for rank " + std::to_string(rank));
    f.rank = r;
    ENGRAM_ASSIGN_OR_RETURN(f.file, FileField(e, where, kWhat, dir, &f.path));
    ENGRAM_ASSIGN_OR_RETURN(f.fingerprint, Hex64Field(e, "fingerprint", where, kWhat));
    ENGRAM_ASSIGN_OR_RETURN(f.slots, U32List(e, "slots", where));
    if (f.slots != StridedSlots(out.slot_count, out.ranks, r)) return Bad(where + " \"slots\" are not rank's strided slots");
    ENGRAM_ASSIGN_OR_RETURN(f.rows, U64Field(e, "rows", where, kWhat));
    uint64_t rows = 0;
    for (const SlotRows& range : SlotRowRanges(layout, f.slots)) rows += range.rows;
    if (f.rows != rows) {
      return Bad(where + " has " + std::to_string(f.rows) + " rows; its slots' primes sum to " + std::to_string(rows));
    }
    out.rank_files.push_back(std::move(f));
  }
  return out;
}

}  // namespace

json RankManifestJson(const RankManifest& m) {
  json files = json::array();
  for (const RankFile& f : m.rank_files) {
    files.push_back({{"rank", f.rank}, {"file", f.file}, {"fingerprint", Hex64(f.fingerprint)}, {"slots", f.slots},
                     {"rows", f.rows}});
  }
  return json{{"format", kRankManifestFormat},
              {"manifest_id", Hex64(m.manifest_id)},
              {"name", m.name},
              {"ranks", m.ranks},
              {"slot_count", m.slot_count},
              {"assignment", kStridedAssignment},
              {"slot_to_rank", m.slot_to_rank},
              {"slot_index_in_rank", m.slot_index_in_rank},
              {"source_rows", m.source_rows},
              {"record_bytes", m.record_bytes},
              {"hash_layout", m.hash_layout},
              {"rank_files", files}};
}

Result<RankManifest> ParseRankManifest(std::string_view text, const std::string& dir) {
  auto doc = ParseBoundedJson(text);
  if (!doc.ok()) return Bad(doc.status().message());
  return ParseManifest(*doc, dir);
}

Result<RankManifest> ReadRankManifest(const std::string& path) {
  ENGRAM_ASSIGN_OR_RETURN(std::string text, fileutil::ReadRegularFile(path, kMaxRankManifestBytes, "rank manifest"));
  // A table file given where its manifest belongs: its binary header would
  // otherwise be reported as whatever the JSON parser trips on first.
  if (text.size() >= sizeof kTableMagic && std::memcmp(text.data(), kTableMagic, sizeof kTableMagic) == 0) {
    return Status::InvalidArgument("rank manifest " + path +
                                   " is an Engram table file, not a rank manifest (the JSON file engram-convert "
                                   "--ranks writes): give a table as TableOptions::path (--table), a manifest as "
                                   "TableOptions::manifest (--manifest)");
  }
  auto m = ParseRankManifest(text, DirectoryOf(path));
  if (!m.ok()) return m.status().WithContext(path);
  return m;
}

Status CheckRankTable(const RankManifest& manifest, uint32_t rank, const TableFile& table) {
  const RankFile& f = manifest.rank_files.at(rank);
  const std::string where = table.path() + " (rank " + std::to_string(rank) + " of manifest " + manifest.name + ")";
  if (table.fingerprint() != f.fingerprint) {
    return Status::InvalidArgument(where + ": fingerprint " + Hex64(table.fingerprint()) + ", the manifest recorded " +
                                   Hex64(f.fingerprint) + ": the file was rewritten or replaced after the manifest");
  }
  const RankShard* shard = table.rank_shard();
  if (shard == nullptr) return Status::InvalidArgument(where + ": not a rank table (no rank_shard in its metadata)");
  if (shard->manifest_id != manifest.manifest_id) {
    return Status::InvalidArgument(where + ": belongs to manifest " + Hex64(shard->manifest_id) + ", not " +
                                   Hex64(manifest.manifest_id));
  }
  if (shard->ranks != manifest.ranks || shard->rank != rank || shard->slots != f.slots) {
    return Status::InvalidArgument(where + ": is rank " + std::to_string(shard->rank) + " of " +
                                   std::to_string(shard->ranks) + ", the manifest wants rank " + std::to_string(rank) +
                                   " of " + std::to_string(manifest.ranks));
  }
  if (table.record_bytes() != manifest.record_bytes) {
    return Status::InvalidArgument(where + ": its rows are " + std::to_string(table.record_bytes()) +
                                   " bytes, the manifest's record_bytes is " + std::to_string(manifest.record_bytes));
  }
  if (shard->source_rows != manifest.source_rows) {
    return Status::InvalidArgument(where + ": it was split from a table of " + std::to_string(shard->source_rows) +
                                   " rows, the manifest's source_rows is " + std::to_string(manifest.source_rows));
  }
  return Status::OK();
}

}  // namespace engram
