// Writes a reference table (format version 2, FORMAT.md "Reference tables"):
// a small file that serves the rows of safetensors shards where they lie,
// instead of a rewritten copy of them.
//
// It reads every referenced byte once (the weight and scale tensors, in 4
// MiB sequential reads) to compute one XXH3-64 per 4 KiB block, records each
// shard's size, modification time and fingerprint, and writes the file
// atomically (temporary name, data before header, fsync, rename), like
// TableWriter. Its size is about 8 / 4096 of the referenced data plus the
// metadata: ~0.2 %.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engram/status.h"
#include "storage/table_converter.h"
#include "storage/table_format.h"

namespace engram {

// `spec` from SafetensorsConvertSpec (each shard's weight and scale tensors
// in the same file). Shard files given as absolute paths are recorded as
// such; relative ones relative to out_path's directory, so a reference moved
// together with its shards keeps working. Uses options.hash_layout,
// options.writer.checksum_salt / sync, options.created_by and
// options.progress (rows checksummed so far).
Result<TableHeader> WriteReferenceTable(const ConvertSpec& spec, const std::string& out_path,
                                        const ConvertOptions& options);

// Rows [first_row, first_row + rows) of shard `shard` of a spec (row numbers
// within that shard's tensors).
struct ReferencePiece {
  size_t shard = 0;
  uint64_t first_row = 0;
  uint64_t rows = 0;
};

// The same for a table whose rows are `pieces` of the spec's shards, in
// that order (a rank table: its slots' row ranges). Each piece is one shard
// entry of the reference, pointing at the piece's first weight and scale
// row; a shard file may appear in several. options.hash_layout is checked
// against the spec's rows (the whole source's); `extra_metadata`'s members
// are added to the metadata (e.g. "rank_shard").
Result<TableHeader> WriteReferenceTable(const ConvertSpec& spec, const std::vector<ReferencePiece>& pieces,
                                        const std::string& out_path, const ConvertOptions& options,
                                        const nlohmann::json& extra_metadata);

}  // namespace engram
