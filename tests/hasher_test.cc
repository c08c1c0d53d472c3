// The Engram hasher against the public reference vectors (both layers, with
// the token map and in identity mode), chunked hashing, the exact floor
// modulo, and layout validation.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engram/hasher.h"
#include "src/ngram/floor_mod.h"
#include "storage/layout_json.h"
#include "storage/prime.h"
#include "src/ngram/scaled_layout.h"

namespace engram {
namespace {

const std::string kHashDir = std::string(ENGRAM_FIXTURE_DIR) + "/engram-hash";

std::vector<uint32_t> ReadU32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<uint32_t> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::shared_ptr<const TokenMap> V41TokenMap() {
  auto m = TokenMap::FromFile(kHashDir + "/token-map.u32");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::make_shared<TokenMap>(std::move(*m));
}

NgramHasher MakeHasher(uint32_t layer, bool mapped, std::vector<uint32_t> slots = {}) {
  auto layout = EngramHashLayout::FromFile(kHashDir + "/layout-v41.json", layer);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  auto h = NgramHasher::Create(*layout, mapped ? V41TokenMap() : nullptr, std::move(slots));
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return std::move(*h);
}

TEST(HasherTest, MatchesEveryReferenceVectorInBothModesAndLayers) {
  const nlohmann::json manifest = ReadJson(kHashDir + "/vectors/manifest.json");
  ASSERT_GE(manifest["sequences"].size(), 13u);
  size_t checked = 0;
  for (bool mapped : {true, false}) {
    for (uint32_t layer : {0u, 1u}) {
      const NgramHasher hasher = MakeHasher(layer, mapped);
      ASSERT_EQ(hasher.rows_per_token(), 24u);
      for (const auto& seq : manifest["sequences"]) {
        const std::string name = seq["name"];
        const auto& files = seq["files"];
        const auto tokens = ReadU32(kHashDir + "/vectors/" + files["tokens"]["file"].get<std::string>());
        const auto expected =
            ReadU32(kHashDir + "/vectors/" + files[mapped ? "rows_mapped" : "rows_identity"]["file"].get<std::string>());
        ASSERT_EQ(tokens.size(), seq["length"].get<size_t>()) << name;
        ASSERT_EQ(expected.size(), tokens.size() * 48) << name;
        auto rows = hasher.Hash(tokens);
        ASSERT_TRUE(rows.ok()) << name << ": " << rows.status().ToString();
        for (size_t t = 0; t < tokens.size(); ++t) {
          for (size_t c = 0; c < 24; ++c) {
            ASSERT_EQ((*rows)[t * 24 + c], expected[t * 48 + layer * 24 + c])
                << name << (mapped ? " mapped" : " identity") << " layer " << layer << " position " << t
                << " column " << c;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 4u * 2000 * 24);
}

TEST(HasherTest, IdentityModeOverflowVectorsAreCovered) {
  // The wrap-around path must actually be exercised by the vectors above.
  const nlohmann::json manifest = ReadJson(kHashDir + "/vectors/manifest.json");
  int overflowing = 0;
  for (const auto& seq : manifest["sequences"]) overflowing += seq["identity_int64_overflow"].get<bool>();
  EXPECT_GE(overflowing, 2);
}

TEST(HasherTest, ChunkedHashingWithHistoryEqualsWholeSequence) {
  const auto tokens = ReadU32(kHashDir + "/vectors/english_2000.tokens.u32");
  for (bool mapped : {true, false}) {
    const NgramHasher hasher = MakeHasher(0, mapped);
    auto whole = hasher.Hash(tokens);
    ASSERT_TRUE(whole.ok());
    for (size_t chunk : {1u, 2u, 3u, 7u, 500u, 1999u}) {
      std::vector<uint64_t> chunked(whole->size());
      for (size_t start = 0; start < tokens.size(); start += chunk) {
        const size_t n = std::min(chunk, tokens.size() - start);
        std::span<const uint32_t> all(tokens);
        // Full history: the hasher must use only its tail.
        ASSERT_TRUE(hasher.Hash(all.subspan(0, start), all.subspan(start, n),
                                std::span<uint64_t>(chunked).subspan(start * 24, n * 24)).ok());
      }
      EXPECT_EQ(chunked, *whole) << "chunk " << chunk << (mapped ? " mapped" : " identity");
    }
  }
}

TEST(HasherTest, PadTokenAtStartHashesLikeSequenceStart) {
  const NgramHasher hasher = MakeHasher(0, false);
  std::vector<uint32_t> with_pad = {2, 2, 2, 500, 600};
  auto a = hasher.Hash(with_pad);
  auto b = hasher.Hash(std::span<const uint32_t>(with_pad).subspan(3));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(std::equal(b->begin(), b->end(), a->begin() + 3 * 24));
}

TEST(HasherTest, TokenOutsideTheMapIsOutOfRange) {
  const NgramHasher hasher = MakeHasher(0, true);
  std::vector<uint32_t> tokens = {5, 129280};
  auto r = hasher.Hash(tokens);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status().message().find("129280 at position 1"), std::string::npos) << r.status().ToString();
  std::vector<uint32_t> history = {1u << 30};
  std::vector<uint64_t> out(24);
  Status st = hasher.Hash(history, std::span<const uint32_t>(tokens).subspan(0, 1), out);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
}

TEST(HasherTest, OutputTooSmallIsAnError) {
  const NgramHasher hasher = MakeHasher(0, false);
  std::vector<uint32_t> tokens = {5, 6};
  std::vector<uint64_t> out(47);
  EXPECT_EQ(hasher.Hash({}, tokens, out).code(), StatusCode::kInvalidArgument);
}

// The slot subsets a rank may hold: strided for every R the issue names,
// contiguous splits, single slots and random subsets.
std::vector<std::vector<uint32_t>> SlotSubsets() {
  std::vector<std::vector<uint32_t>> subsets;
  for (uint32_t ranks : {1u, 2u, 3u, 4u, 5u, 6u, 24u}) {
    for (uint32_t rank = 0; rank < ranks; ++rank) subsets.push_back(*StridedRankSlots(24, ranks, rank));
  }
  for (uint32_t first : {0u, 6u, 12u, 18u}) {
    std::vector<uint32_t> contiguous;
    for (uint32_t s = first; s < first + 6; ++s) contiguous.push_back(s);
    subsets.push_back(contiguous);
  }
  std::mt19937 rng(44);
  for (int i = 0; i < 20; ++i) {
    std::vector<uint32_t> random;
    for (uint32_t s = 0; s < 24; ++s) {
      if (rng() % 3 == 0) random.push_back(s);
    }
    if (random.empty()) random.push_back(rng() % 24);
    subsets.push_back(random);
  }
  return subsets;
}

TEST(HasherTest, SlotSubsetIdsAreTheReferenceIdsMovedToThePackedOffsets) {
  const nlohmann::json manifest = ReadJson(kHashDir + "/vectors/manifest.json");
  const auto subsets = SlotSubsets();
  size_t checked = 0;
  for (bool mapped : {true, false}) {
    for (uint32_t layer : {0u, 1u}) {
      for (const auto& slots : subsets) {
        const NgramHasher rank = MakeHasher(layer, mapped, slots);
        const EngramHashLayout& layout = rank.layout();
        ASSERT_EQ(rank.rows_per_token(), slots.size());
        ASSERT_EQ(rank.slots(), slots);
        // The packed table: each slot's range in turn, no gaps.
        std::vector<uint64_t> full_offset, local_offset;
        uint64_t rows = 0;
        for (uint32_t s : slots) {
          full_offset.push_back(layout.offsets[s / layout.heads][s % layout.heads]);
          local_offset.push_back(rows);
          rows += layout.primes[s / layout.heads][s % layout.heads];
        }
        ASSERT_EQ(rank.table_rows(), rows);
        for (const auto& seq : manifest["sequences"]) {
          const auto& files = seq["files"];
          const auto tokens = ReadU32(kHashDir + "/vectors/" + files["tokens"]["file"].get<std::string>());
          const auto expected = ReadU32(kHashDir + "/vectors/" +
                                        files[mapped ? "rows_mapped" : "rows_identity"]["file"].get<std::string>());
          auto ids = rank.Hash(tokens);
          ASSERT_TRUE(ids.ok()) << ids.status().ToString();
          ASSERT_EQ(ids->size(), tokens.size() * slots.size());
          for (size_t t = 0; t < tokens.size(); ++t) {
            for (size_t j = 0; j < slots.size(); ++j) {
              const uint64_t reference = expected[t * 48 + layer * 24 + slots[j]];
              ASSERT_EQ((*ids)[t * slots.size() + j], reference - full_offset[j] + local_offset[j])
                  << seq["name"] << (mapped ? " mapped" : " identity") << " layer " << layer << " position " << t
                  << " slot " << slots[j];
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 4u * 2000 * 24 * 7);
}

TEST(HasherTest, SlotSubsetChunkedWithHistoryEqualsWhole) {
  const auto tokens = ReadU32(kHashDir + "/vectors/english_2000.tokens.u32");
  const NgramHasher rank = MakeHasher(1, true, {1, 5, 9, 13, 17, 21});
  auto whole = rank.Hash(tokens);
  ASSERT_TRUE(whole.ok());
  std::vector<uint64_t> chunked(whole->size());
  std::span<const uint32_t> all(tokens);
  for (size_t start = 0; start < tokens.size(); start += 7) {
    const size_t n = std::min<size_t>(7, tokens.size() - start);
    ASSERT_TRUE(rank.Hash(all.subspan(0, start), all.subspan(start, n),
                          std::span<uint64_t>(chunked).subspan(start * 6, n * 6)).ok());
  }
  EXPECT_EQ(chunked, *whole);
}

TEST(HasherTest, AnEmptySlotListIsEverySlot) {
  const NgramHasher every = MakeHasher(0, false, {});
  EXPECT_EQ(every.rows_per_token(), 24u);
  EXPECT_EQ(every.table_rows(), every.layout().total_rows);
  const auto tokens = ReadU32(kHashDir + "/vectors/english_2000.tokens.u32");
  std::vector<uint32_t> all_slots(24);
  for (uint32_t s = 0; s < 24; ++s) all_slots[s] = s;
  EXPECT_EQ(*every.Hash(tokens), *MakeHasher(0, false, all_slots).Hash(tokens));
}

TEST(HasherTest, SlotsOutOfRangeOrNotAscendingAreInvalid) {
  auto layout = EngramHashLayout::FromFile(kHashDir + "/layout-v41.json", 0);
  ASSERT_TRUE(layout.ok());
  for (std::vector<uint32_t> bad : std::vector<std::vector<uint32_t>>{{24}, {3, 3}, {5, 2}, {0, 1u << 31}}) {
    auto h = NgramHasher::Create(*layout, nullptr, bad);
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument) << h.status().ToString();
  }
  auto h = NgramHasher::Create(*layout, nullptr, {24});
  EXPECT_NE(h.status().message().find("slot 24 is out of range"), std::string::npos) << h.status().ToString();
}

TEST(StridedRankSlotsTest, RanksHoldEverySlotOnceWithSizesDifferingByAtMostOne) {
  for (uint32_t ranks = 1; ranks <= 24; ++ranks) {
    std::vector<int> holder(24, -1);
    for (uint32_t r = 0; r < ranks; ++r) {
      auto slots = StridedRankSlots(24, ranks, r);
      ASSERT_TRUE(slots.ok());
      EXPECT_TRUE(std::is_sorted(slots->begin(), slots->end()));
      EXPECT_GE(slots->size(), 24 / ranks);
      EXPECT_LE(slots->size(), (24 + ranks - 1) / ranks);
      for (uint32_t s : *slots) {
        EXPECT_EQ(s % ranks, r);
        EXPECT_EQ(holder[s], -1) << "slot " << s << " held twice";
        holder[s] = static_cast<int>(r);
      }
    }
    EXPECT_EQ(std::count(holder.begin(), holder.end(), -1), 0) << ranks << " ranks";
  }
  EXPECT_EQ(*StridedRankSlots(24, 5, 4), (std::vector<uint32_t>{4, 9, 14, 19}));
}

TEST(StridedRankSlotsTest, ZeroOrTooManyRanksAndRankPastTheEndAreInvalid) {
  EXPECT_EQ(StridedRankSlots(24, 0, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(StridedRankSlots(24, 25, 0).status().code(), StatusCode::kInvalidArgument);
  auto past = StridedRankSlots(24, 4, 4);
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("rank 4"), std::string::npos) << past.status().ToString();
}

TEST(FloorModTest, MatchesInt128FloorModuloOnEdgeAndRandomValues) {
  std::mt19937_64 rng(42);
  std::vector<uint64_t> divisors = {2, 3, 7, 16000057, 16000889, (1ull << 32) + 15, (1ull << 62) + 135,
                                    9223372036854775783ull /* largest prime < 2^63 */, 1ull << 20};
  for (int i = 0; i < 50; ++i) divisors.push_back((rng() >> (rng() % 62)) | 2);
  std::vector<uint64_t> values = {0, 1, 2, ~0ull, 1ull << 63, (1ull << 63) - 1, (1ull << 63) + 1};
  for (int i = 0; i < 2000; ++i) values.push_back(rng());
  for (uint64_t d : divisors) {
    const FloorModulus m = MakeFloorModulus(d);
    for (uint64_t v : values) {
      const __int128 s = static_cast<int64_t>(v);
      __int128 expect = s % static_cast<__int128>(d);
      if (expect < 0) expect += d;
      ASSERT_EQ(FloorMod(m, v), static_cast<uint64_t>(expect)) << "value " << v << " divisor " << d;
      ASSERT_EQ(UnsignedMod(m, v), v % d) << "value " << v << " divisor " << d;
    }
  }
}

TEST(PrimeTest, RecognizesPrimesAndComposites) {
  EXPECT_TRUE(IsPrime(2));
  EXPECT_TRUE(IsPrime(16000057));
  EXPECT_TRUE(IsPrime(9223372036854775783ull));
  EXPECT_FALSE(IsPrime(0));
  EXPECT_FALSE(IsPrime(1));
  EXPECT_FALSE(IsPrime(16000058));
  EXPECT_FALSE(IsPrime(3215031751ull));  // strong pseudoprime to bases 2, 3, 5, 7
  EXPECT_FALSE(IsPrime(16000057ull * 16000079ull));
}

// ---- layout parsing and validation ----

nlohmann::json V41Layer0() { return ReadJson(kHashDir + "/layout-v41.json")["layers"][0]; }

Status ParseLayer(const nlohmann::json& layer) { return EngramHashLayout::FromJson(layer.dump()).status(); }

void ExpectLayoutError(const nlohmann::json& layer, const std::string& needle) {
  Status st = ParseLayer(layer);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(needle), std::string::npos) << "'" << needle << "' not in: " << st.ToString();
}

TEST(LayoutTest, ParsesV41LayersFromDocumentAndFromEmbeddedLayerObject) {
  auto l0 = EngramHashLayout::FromFile(kHashDir + "/layout-v41.json", 0);
  auto l1 = EngramHashLayout::FromFile(kHashDir + "/layout-v41.json", 1);
  ASSERT_TRUE(l0.ok() && l1.ok());
  EXPECT_EQ(l0->layer_id, 1u);
  EXPECT_EQ(l1->layer_id, 14u);
  EXPECT_EQ(l0->orders, (std::vector<uint32_t>{2, 3, 4}));
  EXPECT_EQ(l0->total_rows, 384006168u);
  EXPECT_EQ(l1->total_rows, 384016682u);
  EXPECT_EQ(l1->multipliers[3], 82619226485591);
  // A table's metadata embeds one layer object; ToJson round-trips through it.
  auto again = EngramHashLayout::FromJson(l1->ToJson());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *l1);
  auto from_object = LayoutFromJson(LayoutToJson(*l0));
  ASSERT_TRUE(from_object.ok());
  EXPECT_EQ(*from_object, *l0);
}

TEST(LayoutTest, LayerIndexOutOfRangeIsAnError) {
  auto r = EngramHashLayout::FromFile(kHashDir + "/layout-v41.json", 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("layer index 2"), std::string::npos);
  EXPECT_FALSE(EngramHashLayout::FromJson(V41Layer0().dump(), 1).ok());
}

TEST(LayoutTest, MissingFileAndBadJsonAreErrors) {
  EXPECT_EQ(EngramHashLayout::FromFile("/nonexistent/layout.json").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(EngramHashLayout::FromJson("{\"layers\": [").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EngramHashLayout::FromJson("[1, 2]").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EngramHashLayout::FromJson("{}").status().code(), StatusCode::kInvalidArgument);
}

TEST(LayoutTest, MissingFieldsAreNamed) {
  for (const char* field : {"layer_id", "orders", "heads", "pad_id", "multipliers", "primes", "offsets", "total_rows"}) {
    nlohmann::json l = V41Layer0();
    l.erase(field);
    ExpectLayoutError(l, std::string("missing field '") + field + "'");
  }
}

TEST(LayoutTest, WrongCountsAreErrors) {
  nlohmann::json l = V41Layer0();
  l["multipliers"].erase(3);
  ExpectLayoutError(l, "multipliers has 3 values");
  l = V41Layer0();
  l["primes"][1].erase(7);
  ExpectLayoutError(l, "primes[1] has 7 values");
  l = V41Layer0();
  l["offsets"].erase(2);
  ExpectLayoutError(l, "offsets has 2 rows");
  l = V41Layer0();
  l["heads"] = 7;
  ExpectLayoutError(l, "expected heads = 7");
  l = V41Layer0();
  l["orders"] = {2, 2, 4};
  ExpectLayoutError(l, "strictly ascending");
}

TEST(LayoutTest, NonPrimeOrZeroPrimesAreErrors) {
  nlohmann::json l = V41Layer0();
  l["primes"][0][3] = 16000098;
  ExpectLayoutError(l, "primes[0][3] = 16000098 is not a prime");
  l = V41Layer0();
  l["primes"][2][0] = 0;
  ExpectLayoutError(l, "primes[2][0] = 0 is not a prime");
}

TEST(LayoutTest, InconsistentOffsetsAndTotalAreErrors) {
  nlohmann::json l = V41Layer0();
  l["offsets"][1][2] = l["offsets"][1][2].get<uint64_t>() + 1;
  ExpectLayoutError(l, "offsets[1][2]");
  l = V41Layer0();
  l["total_rows"] = 384006169;
  ExpectLayoutError(l, "total_rows = 384006169");
}

TEST(LayoutTest, MultiplierStringsMustBeDecimalInt64) {
  nlohmann::json l = V41Layer0();
  l["multipliers"][0] = "12x";
  ExpectLayoutError(l, "multipliers[0]");
  l["multipliers"][0] = "99999999999999999999";
  ExpectLayoutError(l, "not a decimal int64");
  l["multipliers"][0] = 76632096046245;  // plain integers are accepted
  EXPECT_TRUE(ParseLayer(l).ok());
  l["multipliers"][0] = -5;
  EXPECT_TRUE(ParseLayer(l).ok());
  l["pad_id"] = -1;
  ExpectLayoutError(l, "pad_id");
}

// A target whose per-head share is above the largest 64-bit prime must not
// wrap the prime search around to 2 (a 2-row "scaled" table).
TEST(ScaleLayoutTest, TargetBeyondTheLargestPrimeIsAnErrorNotAWrappedTinyLayout) {
  EngramHashLayout one;
  one.orders = {1};
  one.heads = 1;
  one.multipliers = {1};
  one.primes = {{3}};
  one.offsets = {{0}};
  one.total_rows = 3;
  ASSERT_TRUE(one.Validate().ok());
  for (uint64_t target : {~uint64_t{0}, ~uint64_t{0} - 57, uint64_t(1) << 63}) {
    auto scaled = ScaleLayout(one, target);
    EXPECT_FALSE(scaled.ok()) << target << " -> " << scaled->total_rows << " rows";
    if (!scaled.ok()) {
      EXPECT_EQ(scaled.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(TokenMapTest, ReadsV41MapAndRejectsBadSizes) {
  auto m = TokenMap::FromFile(kHashDir + "/token-map.u32");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->size(), 129280u);
  EXPECT_EQ(m->ids()[2], 2u);
  const std::string path = ::testing::TempDir() + "/bad-map.u32";
  {
    std::ofstream out(path, std::ios::binary);
    out.write("abcdef", 6);
  }
  EXPECT_EQ(TokenMap::FromFile(path).status().code(), StatusCode::kCorruption);
  std::remove(path.c_str());
  EXPECT_EQ(TokenMap::FromFile("/nonexistent/map.u32").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace engram
