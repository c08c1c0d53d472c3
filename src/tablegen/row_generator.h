// Deterministic synthetic row contents: the bytes of row r are a pure function
// of (seed, r). engram-gen writes tables with it, and tests, the store's tests
// and stress tests use it to check any returned row byte for byte without
// keeping a copy of the table.
//
// Definition (stable; other languages can reproduce it):
//   state = XXH3_64bits_withSeed(row as 8 little-endian bytes, seed)
//   for each 8-byte word i of the output (the last one may be partial):
//     state += 0x9E3779B97F4A7C15
//     z = state; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//                z = (z ^ (z >> 27)) * 0x94D049BB133111EB; z ^= z >> 31
//     word i = z as little-endian bytes (truncated for the last word)
// i.e. a SplitMix64 stream keyed by an XXH3 hash of the row ID: about one
// nanosecond per 8 bytes, so generation outruns any disk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace engram {

void GenerateRow(uint64_t seed, uint64_t row, std::span<std::byte> out);

// `count` consecutive rows starting at `first_row`, each `record_bytes` long,
// packed into `out` (which must hold count * record_bytes bytes).
void GenerateRows(uint64_t seed, uint64_t first_row, uint64_t count, uint32_t record_bytes,
                  std::span<std::byte> out);

}  // namespace engram
