// The manifest of a layer converted into rank tables (FORMAT.md "Rank tables
// and manifests"): which file each rank opens, the fingerprint that file must
// have, and the slot maps of the all-gather layout. A small JSON file written
// last by the converter, atomically, so a manifest on disk always names
// complete rank tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engram/status.h"
#include "storage/table_file.h"

namespace engram {

inline constexpr char kRankManifestFormat[] = "engram-rank-manifest/1";
// A manifest holds a layout (a few KiB) and R <= 24 short entries; a larger
// file than this is not one.
inline constexpr uint64_t kMaxRankManifestBytes = 16ull << 20;

struct RankFile {
  uint32_t rank = 0;
  std::string file;  // as stored: absolute, or relative to the manifest's directory
  std::string path;  // `file` resolved against that directory
  uint64_t fingerprint = 0;  // TableFile::fingerprint() of the rank table
  std::vector<uint32_t> slots;
  uint64_t rows = 0;
};

struct RankManifest {
  uint64_t manifest_id = 0;
  std::string name;  // the layer's table name (the manifest's stem)
  uint32_t ranks = 0;
  uint32_t slot_count = 0;
  // The all-gather layout: slot s is part[slot_to_rank[s]][..., slot_index_in_rank[s], ...].
  std::vector<uint32_t> slot_to_rank;
  std::vector<uint32_t> slot_index_in_rank;
  uint64_t source_rows = 0;
  uint32_t record_bytes = 0;
  nlohmann::json hash_layout;  // the full layer's
  std::vector<RankFile> rank_files;  // rank_files[r].rank == r
};

// The manifest as written (rank_files[].path is not stored).
nlohmann::json RankManifestJson(const RankManifest& manifest);

// Reads and checks a manifest: a regular file of at most
// kMaxRankManifestBytes, JSON nesting bounded, every field present and
// consistent (format, ranks in 1..24, the strided slot maps, each rank's
// slots and rows from the layout, the layout valid for source_rows).
// Relative rank files are resolved against the manifest's directory.
// Corruption (InvalidArgument for a file that is not a regular file, and
// for an Engram table file given in a manifest's place) names the manifest
// and the field.
Result<RankManifest> ReadRankManifest(const std::string& path);

// The same from the manifest's text; relative rank files are resolved
// against `dir` (the manifest's directory). Pure: no I/O.
Result<RankManifest> ParseRankManifest(std::string_view text, const std::string& dir);

// Checks that `table` is the file `manifest` names for `rank`: its
// fingerprint, and its rank_shard's manifest_id, ranks, rank and slots.
// InvalidArgument names what differs.
Status CheckRankTable(const RankManifest& manifest, uint32_t rank, const TableFile& table);

}  // namespace engram
