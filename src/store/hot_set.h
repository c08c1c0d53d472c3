// Hot set: the rows each table's cache held, saved so that a restarted store
// can read them back ahead of demand (StoreOptions::hot_set_path).
//
// File format (little-endian, version 1):
//
//   magic    8 B  "ENGRAMHS"
//   version  u32  1
//   tables   u32  number of table entries
//   per table entry:
//     fingerprint    u64  TableFile::fingerprint() of the table it was saved from
//     row_count      u64  the table's rows
//     record_bytes   u32  bytes of a row
//     policy_bytes   u32  length of the policy text below
//     capacity_rows  u64  the cache's capacity in rows
//     rows           u64  number of row entries
//     policy         policy_bytes B: the cache policy's canonical spec (RowCacheConfig::ToSpec)
//     rows x { row_id u64, estimate u32 }  most valuable first (RowCache::ResidentRowsByValue)
//   checksum u64  XXH3-64 (seed 0) of every byte before it
//
// A hot set applies to a table only if fingerprint, row count, record bytes,
// policy and capacity all match: with another capacity or policy the saved
// order says little about what the new cache should hold. Any row ID out of
// range, a length that runs past the end, a wrong checksum or trailing bytes
// make the whole file corrupt. The file is replaced atomically: written to a
// temporary file beside it, fsynced, renamed over it, and the directory
// fsynced, so a crash while saving leaves the previous hot set whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engram/status.h"

namespace engram {

struct HotSetRow {
  uint64_t row_id = 0;
  uint32_t estimate = 0;  // the frequency sketch's estimate when saved
};

struct HotSetTable {
  uint64_t fingerprint = 0;
  uint64_t row_count = 0;
  uint32_t record_bytes = 0;
  std::string policy;  // canonical spec
  uint64_t capacity_rows = 0;
  std::vector<HotSetRow> rows;  // most valuable first
};

std::string EncodeHotSet(const std::vector<HotSetTable>& tables);
// Corruption naming what is wrong for any file EncodeHotSet did not write
// whole.
Result<std::vector<HotSetTable>> DecodeHotSet(const std::string& bytes);

// Writes atomically (see above), with fileutil::WriteFileAtomically: only
// over a regular file or where none is, never over a file the process reads
// (storage/input_files.h), and a temporary file a killed writer left beside
// the path is removed first.
Status WriteHotSetFile(const std::string& path, const std::vector<HotSetTable>& tables);
// NotFound when there is no file; OutOfRange when it holds more than
// max_bytes (then ReadHotSetHeads says whose it is); otherwise reads it and
// decodes.
Result<std::vector<HotSetTable>> ReadHotSetFile(const std::string& path, uint64_t max_bytes);

// One entry of a hot set without its rows.
struct HotSetEntryHead {
  HotSetTable table;  // rows left empty
  uint64_t rows = 0;  // how many the entry lists
};
// Every entry's header, read without the rows (a few bytes per entry,
// whatever the file's size): for a file too large to read whole, to tell
// which tables, policies and capacities it was saved for. Corruption if an
// entry runs past the end; the checksum is not verified (that takes the
// whole file).
Result<std::vector<HotSetEntryHead>> ReadHotSetHeads(const std::string& path);

// Why `saved` cannot warm a table with these properties ("" when it can).
std::string HotSetMismatch(const HotSetTable& saved, uint64_t row_count, uint32_t record_bytes,
                           const std::string& policy, uint64_t capacity_rows);

}  // namespace engram
