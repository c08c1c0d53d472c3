// Fuzz target: rank manifests (ParseRankManifest in storage/rank_manifest.*,
// with the rank_shard rules of storage/rank_shard.*).
//
// Input: the manifest's JSON text. An accepted manifest must write back
// (RankManifestJson) to text that parses to the same manifest, and every
// rank's entry must hold exactly its strided slots.
#include <string_view>

#include "storage/rank_manifest.h"
#include "storage/rank_shard.h"
#include "tests/fuzz/fuzz_util.h"

namespace engram::fuzz {

int FuzzRankManifest(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = ParseRankManifest(text, "dir");
  if (!m.ok()) {
    FUZZ_CHECK(!m.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(m->ranks >= 1 && m->ranks <= kMaxRanks && m->rank_files.size() == m->ranks);
  for (uint32_t r = 0; r < m->ranks; ++r) {
    FUZZ_CHECK(m->rank_files[r].slots == StridedSlots(m->slot_count, m->ranks, r));
    FUZZ_CHECK(!m->rank_files[r].path.empty());
  }
  auto again = ParseRankManifest(RankManifestJson(*m).dump(), "dir");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->manifest_id == m->manifest_id && again->ranks == m->ranks && again->name == m->name);
  for (uint32_t r = 0; r < m->ranks; ++r) {
    FUZZ_CHECK(again->rank_files[r].path == m->rank_files[r].path);
    FUZZ_CHECK(again->rank_files[r].fingerprint == m->rank_files[r].fingerprint);
  }
  return 0;
}

}  // namespace engram::fuzz

ENGRAM_FUZZ_TARGET(FuzzRankManifest)
