#include "storage/rank_shard.h"

#include "storage/embedded_hash_layout.h"
#include "storage/json_fields.h"
#include "storage/layout_json.h"
#include "storage/reference_layout.h"

namespace engram {

using nlohmann::json;

namespace {

Status Bad(const std::string& what) { return Status::InvalidArgument("rank_shard: " + what); }

std::string SlotText(const std::vector<uint32_t>& slots) {
  std::string text = "[";
  for (size_t j = 0; j < slots.size(); ++j) text += (j ? ", " : "") + std::to_string(slots[j]);
  return text + "]";
}

}  // namespace

std::vector<SlotRows> SlotRowRanges(const EngramHashLayout& layout, const std::vector<uint32_t>& slots) {
  std::vector<SlotRows> ranges;
  ranges.reserve(slots.size());
  for (uint32_t s : slots) {
    const uint32_t o = s / layout.heads, h = s % layout.heads;
    ranges.push_back({s, layout.offsets[o][h], layout.primes[o][h]});
  }
  return ranges;
}

json RankShardJson(const RankShard& shard) {
  return json{{"ranks", shard.ranks},
              {"rank", shard.rank},
              {"slots", shard.slots},
              {"assignment", kStridedAssignment},
              {"manifest_id", Hex64(shard.manifest_id)},
              {"source_rows", shard.source_rows}};
}

Result<RankShard> ParseRankShard(const json& j, const json* hash_layout, uint64_t row_count) {
  if (!j.is_object()) return Bad("is not an object");
  if (hash_layout == nullptr) return Bad("a rank table needs the full layer's \"hash_layout\"");
  RankShard shard;
  for (const char* key : {"ranks", "rank", "source_rows"}) {
    if (!j.contains(key) || !IsU64(j[key])) return Bad("has no non-negative integer \"" + std::string(key) + "\"");
  }
  shard.source_rows = j["source_rows"].get<uint64_t>();
  if (Status s = ValidateHashLayout(*hash_layout, shard.source_rows); !s.ok()) {
    return Bad("source_rows " + std::to_string(shard.source_rows) + " and the hash_layout disagree: " + s.message());
  }
  ENGRAM_ASSIGN_OR_RETURN(EngramHashLayout layout, LayoutFromJson(*hash_layout));
  const uint32_t slot_count = layout.rows_per_token();
  const uint64_t ranks = j["ranks"].get<uint64_t>(), rank = j["rank"].get<uint64_t>();
  if (ranks < 1 || ranks > kMaxRanks || ranks > slot_count) {
    return Bad("ranks " + std::to_string(ranks) + " is outside 1.." +
               std::to_string(std::min(kMaxRanks, slot_count)));
  }
  if (rank >= ranks) return Bad("rank " + std::to_string(rank) + " is not below ranks " + std::to_string(ranks));
  shard.ranks = static_cast<uint32_t>(ranks);
  shard.rank = static_cast<uint32_t>(rank);
  if (!j.contains("assignment") || j["assignment"] != kStridedAssignment) {
    return Bad(std::string("\"assignment\" is not \"") + kStridedAssignment + "\"");
  }
  if (!j.contains("manifest_id") || !j["manifest_id"].is_string() ||
      !ParseHex64(j["manifest_id"].get<std::string>(), &shard.manifest_id)) {
    return Bad("has no \"manifest_id\" of the form \"0x\" and 16 hex digits");
  }
  if (!j.contains("slots") || !j["slots"].is_array()) return Bad("has no \"slots\" array");
  const std::vector<uint32_t> want = StridedSlots(slot_count, shard.ranks, shard.rank);
  const json& slots = j["slots"];
  for (const json& s : slots) {
    if (!IsU64(s) || s.get<uint64_t>() >= slot_count) {
      return Bad("slot " + s.dump() + " is not a slot of the layout (0.." + std::to_string(slot_count - 1) + ")");
    }
    shard.slots.push_back(s.get<uint32_t>());
  }
  if (shard.slots != want) {
    return Bad("slots " + SlotText(shard.slots) + " are not rank " + std::to_string(rank) + " of " +
               std::to_string(ranks) + "'s strided slots " + SlotText(want));
  }
  uint64_t rows = 0;
  for (const SlotRows& r : SlotRowRanges(layout, shard.slots)) rows += r.rows;  // bounded by total_rows
  if (rows != row_count) {
    return Bad("the primes of slots " + SlotText(shard.slots) + " sum to " + std::to_string(rows) +
               " rows, but the table has " + std::to_string(row_count));
  }
  return shard;
}

}  // namespace engram
