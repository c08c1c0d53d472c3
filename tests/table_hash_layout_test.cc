// The per-layer hash layout embedded in table metadata: selection from the
// layout file and validation against the table's row count.
#include "storage/embedded_hash_layout.h"

#include <gtest/gtest.h>

#include <functional>

#include "engram/hasher.h"

namespace engram {
namespace {

using nlohmann::json;

const std::string kLayout = std::string(ENGRAM_FIXTURE_DIR) + "/engram-hash/layout-v41.json";

TEST(HashLayout, SelectsV41LayersByLayerId) {
  auto l1 = LoadLayerHashLayout(kLayout, 1);
  ASSERT_TRUE(l1.ok()) << l1.status().ToString();
  EXPECT_EQ((*l1)["layer_id"], 1);
  EXPECT_EQ((*l1)["total_rows"], 384006168u);
  EXPECT_EQ((*l1)["multipliers"][0], "76632096046245");
  EXPECT_EQ((*l1)["compressed_vocab_size"], 99092);  // global fields come along
  EXPECT_EQ((*l1)["layout_file_format"], "engram-hash-layout/1");
  EXPECT_FALSE(l1->contains("layers"));
  EXPECT_TRUE(ValidateHashLayout(*l1, 384006168).ok());
  auto l14 = LoadLayerHashLayout(kLayout, 14);
  ASSERT_TRUE(l14.ok());
  EXPECT_TRUE(ValidateHashLayout(*l14, 384016682).ok());
  EXPECT_FALSE(ValidateHashLayout(*l14, 384006168).ok());
}

TEST(HashLayout, UnknownLayerListsTheAvailableOnes) {
  auto l = LoadLayerHashLayout(kLayout, 2);
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("available: 1, 14"), std::string::npos) << l.status().ToString();
  EXPECT_EQ(LoadLayerHashLayout("/nonexistent/layout.json", 1).status().code(), StatusCode::kNotFound);
}

TEST(HashLayout, EachBrokenFieldIsNamed) {
  const json good = {{"layer_id", 0},            {"orders", {2, 3}},         {"heads", 2},
                     {"pad_id", 2},              {"multipliers", {"3", "5", 7}},
                     {"primes", {{7, 11}, {13, 17}}}, {"offsets", {{0, 7}, {18, 31}}},
                     {"total_rows", 48}};
  ASSERT_TRUE(ValidateHashLayout(good, 48).ok());
  struct Case {
    const char* field;
    std::function<void(json&)> edit;
  };
  std::vector<Case> cases = {
      {"orders", [](json& j) { j.erase("orders"); }},
      {"orders", [](json& j) { j["orders"] = json::array(); }},
      {"orders", [](json& j) { j["orders"] = {3, 2}; }},  // must ascend
      {"layer_id", [](json& j) { j.erase("layer_id"); }},
      {"heads", [](json& j) { j["heads"] = 0; }},
      {"pad_id", [](json& j) { j["pad_id"] = -1; }},
      {"multipliers", [](json& j) { j["multipliers"] = {"3", "5"}; }},  // order 3 needs 3
      {"multipliers[1]", [](json& j) { j["multipliers"][1] = "5x"; }},
      {"multipliers[0]", [](json& j) { j["multipliers"][0] = "9223372036854775808"; }},  // > INT64_MAX
      {"primes", [](json& j) { j["primes"] = {{7, 11}}; }},
      {"primes[1]", [](json& j) { j["primes"][1] = {13}; }},
      {"primes[0][1]", [](json& j) { j["primes"][0][1] = 0; }},
      {"primes[0][1]", [](json& j) { j["primes"][0][1] = 9; }},  // not prime
      {"offsets[1][1]", [](json& j) { j["offsets"][1][1] = 40; }},  // not the prefix sum 31
      {"total_rows", [](json& j) { j["total_rows"] = 49; }},
  };
  for (const Case& c : cases) {
    json bad = good;
    c.edit(bad);
    Status s = ValidateHashLayout(bad, 48);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << c.field << ": " << s.ToString();
  }
  Status wrong_rows = ValidateHashLayout(good, 47);
  EXPECT_NE(wrong_rows.message().find("does not match the table's 47 rows"), std::string::npos)
      << wrong_rows.ToString();
  json nested = good;
  nested["layers"] = json::array({good});
  EXPECT_FALSE(ValidateHashLayout(nested, 48).ok());
}

// The table check and the hasher share one parser: whatever a table accepts,
// a runtime can build a hasher from, and the other way round.
TEST(HashLayout, TableCheckAcceptsExactlyWhatTheHasherAccepts) {
  const json base = {{"layer_id", 3},
                     {"orders", {2, 3}},
                     {"heads", 2},
                     {"pad_id", 2},
                     {"multipliers", {"3", "-5", 7}},  // any int64, as the hasher
                     {"primes", {{7, 11}, {13, 17}}},
                     {"offsets", {{0, 7}, {18, 31}}},
                     {"total_rows", 48}};
  for (int variant = 0; variant < 4; ++variant) {
    json j = base;
    if (variant == 1) j["primes"][1][0] = 15;           // not prime
    if (variant == 2) j["offsets"][0][1] = 8;           // a hole between heads
    if (variant == 3) j["multipliers"][2] = "-9223372036854775808";
    const bool hasher_ok = EngramHashLayout::FromJson(j.dump()).ok();
    EXPECT_EQ(ValidateHashLayout(j, 48).ok(), hasher_ok) << "variant " << variant;
  }
  EXPECT_TRUE(ValidateHashLayout(base, 48).ok());
}

}  // namespace
}  // namespace engram
