// Fuzz target: the table header + metadata parser (storage/table_format.*,
// storage/table_file.*, and the embedded hash layout check of
// storage/embedded_hash_layout.*), through TableFile::Open on an in-memory file.
//
// Input: one control byte, then up to 256 header bytes (FORMAT.md offsets),
// then the metadata section's bytes. Random bytes almost never carry valid
// checksums, so the control byte lets the fuzzer get past them and reach the
// geometry, metadata and layout checks:
//   bit 0: set metadata_bytes / metadata_xxh3 to match the metadata given
//   bit 1: size the file as the header's file_bytes says (sparse, capped) and
//          put the metadata at the header's metadata_offset
//   bit 2: recompute the header checksum
//   bit 3: one non-zero byte in the header block padding
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "storage/table_file.h"
#include "storage/table_format.h"
#include "tests/fuzz/fuzz_util.h"

namespace engram::fuzz {
namespace {

uint64_t Load64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian host (static_assert in storage/byte_order.h users)
}
void Store64(std::byte* p, uint64_t v) { std::memcpy(p, &v, 8); }

constexpr size_t kOffMetadataOffset = 64, kOffMetadataBytes = 72, kOffMetadataXxh3 = 80, kOffFileBytes = 88,
                 kOffHeaderXxh3 = 248;
// Largest (sparse) file the harness makes: tmpfs holes cost nothing, and this
// covers V4.1-sized headers (~105 GB).
constexpr uint64_t kMaxFileBytes = 1ull << 40;

}  // namespace

int FuzzTableFile(const uint8_t* data, size_t size) {
  static MemFile file("engram-fuzz-table");
  if (size < 1) return 0;
  const uint8_t ctrl = data[0];
  ++data;
  --size;
  std::vector<std::byte> header(kTableBlockSize);
  const size_t header_len = std::min<size_t>(size, kTableHeaderBytes);
  std::memcpy(header.data(), data, header_len);
  const uint8_t* meta = data + header_len;
  const size_t meta_len = size - header_len;

  if (ctrl & 1) {
    Store64(header.data() + kOffMetadataBytes, meta_len);
    Store64(header.data() + kOffMetadataXxh3, XXH3_64bits(meta, meta_len));
  }
  uint64_t file_bytes = kTableBlockSize + (meta_len + kTableBlockSize - 1) / kTableBlockSize * kTableBlockSize;
  uint64_t meta_at = kTableBlockSize;
  if (ctrl & 2) {
    const uint64_t want = Load64(header.data() + kOffMetadataOffset);
    const uint64_t padded = (meta_len + kTableBlockSize - 1) / kTableBlockSize * kTableBlockSize;
    if (want >= kTableBlockSize && want <= kMaxFileBytes && padded <= kMaxFileBytes - want) {
      meta_at = want;
      file_bytes = want + padded;
      Store64(header.data() + kOffFileBytes, file_bytes);
    }
  }
  if (ctrl & 8) header[kTableBlockSize - 1 - (ctrl >> 4)] = std::byte{1};
  if (ctrl & 4) Store64(header.data() + kOffHeaderXxh3, XXH3_64bits(header.data(), kOffHeaderXxh3));

  // The pure decoder, with the real size and with a wrong one.
  (void)DecodeTableHeader(header, file_bytes);
  (void)DecodeTableHeader(std::span<const std::byte>(header).first(kTableHeaderBytes), file_bytes);
  (void)DecodeTableHeader(header, file_bytes + kTableBlockSize);

  file.Reset(file_bytes);
  file.WriteAt(header.data(), header.size(), 0);
  file.WriteAt(meta, std::min<uint64_t>(meta_len, file_bytes - meta_at), meta_at);
  auto opened = TableFile::Open(file.path());
  if (!opened.ok()) {
    FUZZ_CHECK(!opened.status().message().empty());
    return 0;
  }
  // Accepted: the geometry must be self-consistent and every row in bounds.
  const TableFile& t = **opened;
  const TableHeader& h = t.header();
  const auto metadata = t.ParseMetadata();
  FUZZ_CHECK(metadata.ok() && metadata->is_object());
  // A rank table's shard was validated: its rank is one of its ranks and it
  // holds slots (whose primes are its rows).
  FUZZ_CHECK((t.rank_shard() != nullptr) == metadata->contains("rank_shard"));
  if (const RankShard* shard = t.rank_shard()) {
    FUZZ_CHECK(shard->rank < shard->ranks && !shard->slots.empty() && h.row_count <= shard->source_rows);
  }
  FUZZ_CHECK(h.record_bytes >= 1 && h.record_bytes <= kMaxRecordBytes);
  FUZZ_CHECK(h.rows_per_block == RowsPerBlock(h.record_bytes));
  FUZZ_CHECK(uint64_t(h.rows_per_block) * h.record_bytes <= kBlockRecordArea);
  FUZZ_CHECK(h.file_bytes == file_bytes);
  FUZZ_CHECK(!t.CheckRow(h.row_count).ok());
  if (h.row_count > 0) {
    const uint64_t last = h.row_count - 1;
    FUZZ_CHECK(t.CheckRow(last).ok());
    FUZZ_CHECK(t.BlockOfRow(last) < h.block_count);
    FUZZ_CHECK(t.geometry().RowFileOffset(last) + h.record_bytes <= h.metadata_offset);
    FUZZ_CHECK(t.geometry().RowsInBlock(h.block_count - 1) >= 1);
    // Data blocks are holes: they must fail verification cleanly.
    std::vector<std::byte> block(kTableBlockSize);
    Status s = t.ReadBlock(t.BlockOfRow(last), block);
    FUZZ_CHECK(!s.ok() && s.code() == StatusCode::kCorruption);
  }
  FUZZ_CHECK(!t.VerifyBlock(h.block_count, std::span<const std::byte>(header)).ok());
  return 0;
}

}  // namespace engram::fuzz

ENGRAM_FUZZ_TARGET(FuzzTableFile)
