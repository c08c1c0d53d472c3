// Fuzz target: the reference-table parser (storage/reference_layout.*,
// and the version-2 paths of storage/table_format.* and storage/table_file.*).
//
// Input: one control byte, record_bytes (LE16), row_count (LE32),
// block_count (LE32, the number of checksums), then the metadata JSON.
// ReferenceLayout::Parse runs on it, and what it accepts must be coherent:
// every row's pieces lie inside their units' covered bytes, add up to the
// record and point into the shard. With control bit 0 the same bytes are
// also written as a whole version-2 file (valid header, checksum section and
// metadata checksums) and opened with TableFile::Open, whose shards (under a
// directory that does not exist) must then fail to open with a Status.
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "storage/reference_layout.h"
#include "storage/table_file.h"
#include "storage/table_format.h"
#include "tests/fuzz/fuzz_util.h"

namespace engram::fuzz {

int FuzzReferenceTable(const uint8_t* data, size_t size) {
  static MemFile file("engram-fuzz-reference");
  constexpr size_t kFixed = 1 + 2 + 4 + 4;
  if (size < kFixed) return 0;
  const uint8_t ctrl = data[0];
  uint16_t record_bytes;
  uint32_t rows, checksums;
  std::memcpy(&record_bytes, data + 1, 2);
  std::memcpy(&rows, data + 3, 4);
  std::memcpy(&checksums, data + 7, 4);
  const std::string_view text(reinterpret_cast<const char*>(data + kFixed), size - kFixed);
  auto header = MakeReferenceTableHeader(record_bytes, rows, checksums, 0, std::max<size_t>(text.size(), 1),
                                         XXH3_64bits(text.data(), text.size()), 7);
  if (!header.ok()) return 0;

  auto layout = ReferenceLayout::Parse(*header, text, "/nonexistent-engram-fuzz");
  if (layout.ok()) {
    const ReferenceLayout& l = *layout;
    FUZZ_CHECK(l.record_bytes() == record_bytes && l.row_count() == rows && l.unit_count() == checksums);
    uint64_t total = 0;
    for (const ReferenceShard& s : l.shards()) total += s.rows;
    FUZZ_CHECK(total == rows);
    const uint64_t step = std::max<uint64_t>(1, rows / 64);
    for (uint64_t r = 0; r < rows; r += step) {
      RowPiece pieces[kMaxRowPieces];
      const int n = l.RowPieces(r, true, pieces);
      FUZZ_CHECK(n >= 1 && n <= kMaxRowPieces);
      uint32_t at = 0;
      for (int i = 0; i < n; ++i) {
        const RowPiece& p = pieces[i];
        FUZZ_CHECK(p.unit < l.unit_count() && p.record_offset == at);
        const ChecksumUnit u = l.Unit(p.unit);
        FUZZ_CHECK(u.begin < u.end && u.end <= kTableBlockSize);
        FUZZ_CHECK(p.block_offset >= u.begin && p.block_offset + p.bytes <= u.end);
        FUZZ_CHECK(u.file_offset + u.end <= l.shards()[u.shard].size);
        at += p.bytes;
      }
      FUZZ_CHECK(at == l.record_bytes());
    }
  } else {
    FUZZ_CHECK(!layout.status().message().empty());
  }

  // The file: its checksum section is built here, so only for sizes a test
  // machine can hold (the reader loads it only after the shards check out).
  if ((ctrl & 1) && !text.empty() && header->data_bytes <= (64u << 20)) {
    TableHeader h = *header;
    std::vector<std::byte> section(h.data_bytes);
    h.checksums_xxh3 = XXH3_64bits(section.data(), h.block_count * 8);
    std::vector<std::byte> block(kTableBlockSize);
    EncodeTableHeader(h, std::span<std::byte, kTableBlockSize>(block.data(), kTableBlockSize));
    file.Reset(h.file_bytes);
    file.WriteAt(block.data(), block.size(), 0);
    file.WriteAt(text.data(), text.size(), h.metadata_offset);
    auto opened = TableFile::Open(file.path());
    FUZZ_CHECK(!opened.ok() || !opened.value()->is_reference() || layout.ok());
  }
  return 0;
}

}  // namespace engram::fuzz

ENGRAM_FUZZ_TARGET(FuzzReferenceTable)
