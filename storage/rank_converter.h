// Conversion of one layer's rows into R rank tables and their manifest
// (FORMAT.md "Rank tables and manifests"; storage/rank_shard.h,
// storage/rank_manifest.h).
//
// Rank r's table holds the rows of its strided slots (s % R == r), each
// slot's full-table row range copied in ascending slot order: an ordinary
// checksummed table (format version 1), or with in_place a reference table
// (version 2) whose entries point at those row ranges of the safetensors
// shards, copying nothing. The rank tables are written first, each
// atomically, beside the manifest; the manifest (naming each by its
// fingerprint) last, atomically, so a manifest on disk always names complete
// tables.
//
// A set is written as a new generation: over an existing manifest, the rank
// tables take the other generation's names (RankTablePath), so the old
// manifest and the set it names keep opening until the new manifest is
// renamed over it; only then are the old set's rank tables removed. A
// conversion that fails (an error, a full disk) removes every rank table it
// wrote, and so does one interrupted by SIGINT, SIGTERM or SIGHUP in a tool
// that called RemoveTempFilesOnTerminationSignals (storage/temp_file_cleanup.h):
// the old set is then as it was. Every output (the manifest and each rank
// table) passes CheckOutputPath (storage/input_files.h) before anything is
// written: none may be a file the process reads (a source, the --layout
// file, the table being split).
//
// Streaming: rows are copied in chunks of about convert.chunk_bytes, so
// memory stays bounded whatever the table size.
#pragma once

#include <cstdint>
#include <string>

#include "engram/status.h"
#include "storage/rank_manifest.h"
#include "storage/table_converter.h"

namespace engram {

struct RankConvertOptions {
  uint32_t ranks = 0;  // 1..min(kMaxRanks, the layout's slot count)
  // Reference tables into the safetensors shards instead of copies.
  bool in_place = false;
  // convert.hash_layout: the layer's layout. Required for a spec; for a
  // table source it overrides the table's own "hash_layout".
  // convert.progress counts rows written over all ranks.
  ConvertOptions convert;
};

// `<stem>.rank<r>-of-<R>.engram` beside the manifest (generation 0), or
// `<stem>.g<N>.rank<r>-of-<R>.engram` (generation N), stem = the manifest's
// path without a ".json" ending. A conversion takes the first generation
// none of whose names the existing manifest names: 0 for a new set, then 1
// and 0 in turn for each conversion over the same manifest.
std::string RankTablePath(const std::string& manifest_path, uint32_t rank, uint32_t ranks, uint32_t generation = 0);

// From checkpoint tensors (SafetensorsConvertSpec / NpyConvertSpec).
Result<RankManifest> ConvertSpecToRanks(const ConvertSpec& spec, const std::string& manifest_path,
                                        const RankConvertOptions& options);

// From an existing Engram table (version 1 or a reference table; not a rank
// table), its rows read and verified block by block.
Result<RankManifest> ConvertTableToRanks(const std::string& table_path, const std::string& manifest_path,
                                         const RankConvertOptions& options);

}  // namespace engram
