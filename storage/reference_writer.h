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

}  // namespace engram
