// The Engram hasher against the public reference vectors (both layers, with
// the token map and in identity mode), chunked hashing, the exact floor
// modulo, and layout validation.
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

NgramHasher MakeHasher(uint32_t layer, bool mapped) {
  auto layout = EngramHashLayout::FromFile(kHashDir + "/layout-v41.json", layer);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  std::shared_ptr<const TokenMap> map;
  if (mapped) {
    auto m = TokenMap::FromFile(kHashDir + "/token-map.u32");
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    map = std::make_shared<TokenMap>(std::move(*m));
  }
  auto h = NgramHasher::Create(*layout, map);
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
