#include "storage/reference_layout.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "storage/block_hash.h"
#include "storage/bounded_json.h"
#include "storage/json_fields.h"

namespace engram {

using nlohmann::json;

namespace {

Status Bad(const std::string& m) { return Status::Corruption("reference table metadata: " + m); }

constexpr std::string_view kWhat = "reference table metadata";

Result<uint64_t> U64(const json& obj, const char* key, const std::string& where) {
  return U64Field(obj, key, where, kWhat);
}

Result<uint64_t> HexU64(const json& obj, const char* key, const std::string& where) {
  return Hex64Field(obj, key, where, kWhat);
}

// The end of `rows` rows of `row_bytes` bytes at `offset`, if it fits in
// `size`.
Result<uint64_t> RegionEnd(uint64_t offset, uint64_t rows, uint64_t row_bytes, uint64_t size,
                           const std::string& what) {
  uint64_t bytes = 0, end = 0;
  if (__builtin_mul_overflow(rows, row_bytes, &bytes) || __builtin_add_overflow(offset, bytes, &end) || end > size) {
    return Bad(what + ": " + std::to_string(rows) + " rows of " + std::to_string(row_bytes) + " bytes at offset " +
               std::to_string(offset) + " do not fit in the " + std::to_string(size) + "-byte shard");
  }
  return end;
}

Result<uint32_t> FieldBytes(const json& fields, size_t i, const char* name, uint64_t offset) {
  const std::string where = "record field " + std::to_string(i);
  const json& f = fields[i];
  if (!f.is_object()) return Bad(where + " is not an object");
  auto n = f.find("name");
  if (n == f.end() || !n->is_string() || n->get<std::string>() != name) {
    return Bad(where + " is not named \"" + name + "\"");
  }
  ENGRAM_ASSIGN_OR_RETURN(uint64_t off, U64(f, "offset", where));
  ENGRAM_ASSIGN_OR_RETURN(uint64_t bytes, U64(f, "bytes", where));
  if (off != offset) return Bad(where + " offset is " + std::to_string(off) + ", expected " + std::to_string(offset));
  if (bytes == 0 || bytes > kMaxRecordBytes) return Bad(where + " bytes " + std::to_string(bytes) + " out of range");
  return static_cast<uint32_t>(bytes);
}

}  // namespace

std::string Hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool ParseHex64(std::string_view text, uint64_t* out) {
  if (text.size() != 18 || text[0] != '0' || text[1] != 'x' ||
      text.find_first_not_of("0123456789abcdef", 2) != std::string_view::npos) {
    return false;
  }
  *out = std::strtoull(std::string(text.substr(2)).c_str(), nullptr, 16);
  return true;
}

std::string DirectoryOf(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

uint64_t ComputeUnitChecksum(std::span<const std::byte> block, const ChecksumUnit& u, uint64_t unit,
                             uint64_t seed_base) {
  return BlockHash(block.data() + u.begin, u.end - u.begin, seed_base ^ unit);
}

uint64_t ReferenceLayout::UnitsOf(uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return 0;
  return (offset + bytes - 1) / kTableBlockSize - offset / kTableBlockSize + 1;
}

Result<ReferenceLayout> ReferenceLayout::Parse(const TableHeader& header, std::string_view metadata_text,
                                               const std::string& reference_dir) {
  static constexpr std::string_view kKeys[] = {"format", "record", "rows", "source"};
  auto parsed = ParseBoundedJsonMembers(metadata_text, kKeys);
  if (!parsed.ok()) return Bad(parsed.status().message());
  const json& m = *parsed;
  if (!m.contains("format") || m["format"] != kReferenceFormat) {
    return Bad(std::string("\"format\" is not \"") + kReferenceFormat + "\"");
  }
  ReferenceLayout layout;
  layout.row_count_ = header.row_count;
  if (!m.contains("record") || !m["record"].is_object()) return Bad("no \"record\" object");
  const json& record = m["record"];
  ENGRAM_ASSIGN_OR_RETURN(uint64_t record_bytes, U64(record, "bytes", "record"));
  if (record_bytes != header.record_bytes) {
    return Bad("record bytes " + std::to_string(record_bytes) + " but the header says " +
               std::to_string(header.record_bytes));
  }
  auto fields = record.find("fields");
  if (fields == record.end() || !fields->is_array() || fields->empty() || fields->size() > 2) {
    return Bad("record \"fields\" is not an array of a weight and an optional scale");
  }
  ENGRAM_ASSIGN_OR_RETURN(layout.weight_row_, FieldBytes(*fields, 0, "weight", 0));
  if (fields->size() == 2) {
    ENGRAM_ASSIGN_OR_RETURN(layout.scale_row_, FieldBytes(*fields, 1, "scale", layout.weight_row_));
  }
  if (uint64_t{layout.weight_row_} + layout.scale_row_ != header.record_bytes) {
    return Bad("record fields add up to " + std::to_string(uint64_t{layout.weight_row_} + layout.scale_row_) +
               " bytes, not " + std::to_string(header.record_bytes));
  }
  ENGRAM_ASSIGN_OR_RETURN(uint64_t rows, U64(m, "rows", "the metadata"));
  if (rows != header.row_count) {
    return Bad("\"rows\" is " + std::to_string(rows) + " but the header says " + std::to_string(header.row_count));
  }
  if (!m.contains("source") || !m["source"].is_object()) return Bad("no \"source\" object");
  const json& source = m["source"];
  if (!source.contains("kind") || source["kind"] != "safetensors") return Bad("source \"kind\" is not \"safetensors\"");
  if (!source.contains("shards") || !source["shards"].is_array() || source["shards"].empty()) {
    return Bad("source has no \"shards\" array");
  }
  const json& shards = source["shards"];
  if (shards.size() > UINT32_MAX) return Bad("too many shards");
  const bool with_scale = layout.scale_row_ != 0;
  uint64_t first_row = 0, units = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string where = "shard " + std::to_string(i);
    const json& e = shards[i];
    if (!e.is_object()) return Bad(where + " is not an object");
    ReferenceShard s;
    auto file = e.find("file");
    if (file == e.end() || !file->is_string() || file->get<std::string>().empty() ||
        file->get<std::string>().find('\0') != std::string::npos) {
      return Bad(where + " has no \"file\"");
    }
    s.file = file->get<std::string>();
    s.path = s.file[0] == '/' || reference_dir.empty() ? s.file : reference_dir + "/" + s.file;
    ENGRAM_ASSIGN_OR_RETURN(s.size, U64(e, "size", where));
    auto mtime = e.find("mtime_ns");
    if (mtime == e.end() || !mtime->is_number_integer()) return Bad(where + " has no integer \"mtime_ns\"");
    s.mtime_ns = mtime->get<int64_t>();
    ENGRAM_ASSIGN_OR_RETURN(s.fingerprint, HexU64(e, "fingerprint", where));
    ENGRAM_ASSIGN_OR_RETURN(s.rows, U64(e, "rows", where));
    ENGRAM_ASSIGN_OR_RETURN(s.weight_offset, U64(e, "weight_offset", where));
    ENGRAM_RETURN_IF_ERROR(RegionEnd(s.weight_offset, s.rows, layout.weight_row_, s.size, where + " weight").status());
    if (with_scale) {
      ENGRAM_ASSIGN_OR_RETURN(s.scale_offset, U64(e, "scale_offset", where));
      ENGRAM_RETURN_IF_ERROR(RegionEnd(s.scale_offset, s.rows, layout.scale_row_, s.size, where + " scale").status());
    } else if (e.contains("scale_offset")) {
      return Bad(where + " has a \"scale_offset\" but the record has no scale");
    }
    s.first_row = first_row;
    if (__builtin_add_overflow(first_row, s.rows, &first_row)) return Bad("shard rows overflow 64 bits");
    // Each region's unit count is at most its bytes / 4096 + 2, bounded by
    // the shard size checked above, so these sums cannot overflow.
    s.weight_units = units;
    units += UnitsOf(s.weight_offset, s.rows * layout.weight_row_);
    s.scale_units = units;
    units += with_scale ? UnitsOf(s.scale_offset, s.rows * layout.scale_row_) : 0;
    s.units_end = units;
    layout.shards_.push_back(std::move(s));
  }
  if (first_row != header.row_count) {
    return Bad("the shards hold " + std::to_string(first_row) + " rows, the header says " +
               std::to_string(header.row_count));
  }
  if (units != header.block_count) {
    return Bad("the shards' tensors span " + std::to_string(units) + " blocks but the header has " +
               std::to_string(header.block_count) + " checksums");
  }
  layout.unit_count_ = units;
  return layout;
}

size_t ReferenceLayout::ShardOfRow(uint64_t row) const {
  auto it = std::upper_bound(shards_.begin(), shards_.end(), row,
                             [](uint64_t r, const ReferenceShard& s) { return r < s.first_row; });
  // Shards without rows share their first_row with the next one: take the
  // last shard starting at or before `row` that has rows.
  size_t i = static_cast<size_t>(it - shards_.begin()) - 1;
  while (shards_[i].rows == 0) --i;
  return i;
}

ChecksumUnit ReferenceLayout::Unit(uint64_t unit) const {
  auto it = std::upper_bound(shards_.begin(), shards_.end(), unit,
                             [](uint64_t u, const ReferenceShard& s) { return u < s.units_end; });
  const ReferenceShard& s = *it;
  const bool weight = unit < s.scale_units;
  const uint64_t region = weight ? s.weight_offset : s.scale_offset;
  const uint64_t bytes = s.rows * (weight ? weight_row_ : scale_row_);
  const uint64_t k = unit - (weight ? s.weight_units : s.scale_units);
  ChecksumUnit u;
  u.shard = static_cast<uint32_t>(it - shards_.begin());
  u.file_offset = (region / kTableBlockSize + k) * kTableBlockSize;
  u.begin = static_cast<uint32_t>(std::max(region, u.file_offset) - u.file_offset);
  u.end = static_cast<uint32_t>(std::min(region + bytes, u.file_offset + kTableBlockSize) - u.file_offset);
  return u;
}

int ReferenceLayout::RowPieces(uint64_t row, bool with_scale, RowPiece* out) const {
  const ReferenceShard& s = shards_[ShardOfRow(row)];
  const uint64_t local = row - s.first_row;
  int n = 0;
  auto cut = [&](uint64_t region, uint64_t first_unit, uint32_t row_bytes, uint32_t record_offset) {
    uint64_t pos = region + local * row_bytes;
    uint32_t left = row_bytes;
    while (left > 0) {
      const uint32_t in_block = static_cast<uint32_t>(pos % kTableBlockSize);
      const uint32_t take = std::min(left, kTableBlockSize - in_block);
      out[n++] = {first_unit + pos / kTableBlockSize - region / kTableBlockSize, in_block, take, record_offset};
      pos += take;
      record_offset += take;
      left -= take;
    }
  };
  cut(s.weight_offset, s.weight_units, weight_row_, 0);
  if (with_scale && scale_row_ != 0) cut(s.scale_offset, s.scale_units, scale_row_, weight_row_);
  return n;
}

}  // namespace engram
