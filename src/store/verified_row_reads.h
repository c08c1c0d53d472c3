// Reading rows outside a gather (read-ahead, warm start): the rows' blocks
// (or a reference table's pieces) are read by the table's I/O engine and
// verified against their checksums before any row is handed on, so nothing
// read this way can put unverified bytes in the cache.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace engram {

class StoreImpl;

// Called once per row: `ok` false when its block failed (read error or
// checksum; counted in the table's counters), and `bytes` its verified
// record when ok. On the store's completion pool (or the calling thread).
using LandRow = std::function<void(uint64_t row, bool ok, std::span<const std::byte> bytes)>;

// Reads `rows` (distinct, in range) of table `table` and lands each through
// `land`, then calls `done` once every row has landed. Returns once the
// reads are issued. A batch that cannot be built (no read buffers) lands
// every row as failed, logged as a warning naming `what`.
void ReadRowsVerified(StoreImpl* store, size_t table, std::vector<uint64_t> rows, const std::string& what,
                      LandRow land, std::function<void()> done);

}  // namespace engram
