// JSON from files is refused when it nests deeper than kMaxJsonDepth, before
// a value exists: a few hundred KB of brackets would otherwise overflow the
// stack of whatever copies or prints the value (engram-inspect and engram-gen
// crashed on such table metadata and layout files).
#include "storage/bounded_json.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "engram/hasher.h"
#include "storage/embedded_hash_layout.h"
#include "storage/safetensors_header.h"
#include "storage/table_file.h"
#include "storage/table_writer.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

std::string Nested(int depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

nlohmann::json NestedValue(int depth) {
  nlohmann::json v = 1;
  for (int i = 0; i < depth; ++i) v = nlohmann::json::array({v});
  return v;
}

TEST(BoundedJson, AcceptsNestingUpToTheLimitAndRefusesOneMore) {
  EXPECT_TRUE(CheckJsonNesting(Nested(kMaxJsonDepth)).ok());
  Status s = CheckJsonNesting(Nested(kMaxJsonDepth + 1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("deeper than 64"), std::string::npos) << s.ToString();
  EXPECT_TRUE(CheckJsonNesting(R"({"a": {"b": [1, {"c": 2}]}})", 4).ok());
  EXPECT_FALSE(CheckJsonNesting(R"({"a": {"b": [1, {"c": 2}]}})", 3).ok());
}

TEST(BoundedJson, BracketsInsideStringsDoNotCount) {
  const std::string brackets(1000, '[');
  EXPECT_TRUE(CheckJsonNesting("{\"k\": \"" + brackets + "\"}").ok());
  // An escaped quote does not end the string.
  EXPECT_TRUE(CheckJsonNesting("{\"k\": \"\\\"" + brackets + "\"}").ok());
  auto v = ParseBoundedJson("{\"k\": \"\\\"" + brackets + "\"}");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ((*v)["k"].get<std::string>().size(), 1001u);
}

TEST(BoundedJson, VeryDeepTextIsRefusedWithoutBuildingAValue) {
  auto v = ParseBoundedJson(Nested(200000));
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseBoundedJson("{\"a\": [1, 2}").ok());       // still a parser
  EXPECT_FALSE(ParseBoundedJson("[1e999999]").ok());           // out_of_range, not a throw
  EXPECT_EQ(ParseBoundedJson("{\"a\": [1, 2]}")->at("a").size(), 2u);
}

TEST(BoundedJson, TableWithDeepMetadataIsCorruptNotACrash) {
  testing::TempDir dir;
  const std::string path = dir.File("deep.engram");
  TableWriterOptions opt;
  opt.record_bytes = 16;
  opt.sync = false;
  opt.metadata = {{"note", NestedValue(kMaxJsonDepth + 1)}};
  auto w = TableWriter::Create(path, opt);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<std::byte> rows(4 * 16, std::byte{7});
  ASSERT_TRUE((*w)->AppendRecords(rows).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto t = TableFile::Open(path);
  EXPECT_EQ(t.status().code(), StatusCode::kCorruption);
  EXPECT_NE(t.status().message().find("deeper than"), std::string::npos) << t.status().ToString();
}

TEST(BoundedJson, DeepLayoutFileIsAnErrorNotACrash) {
  testing::TempDir dir;
  const std::string path = dir.File("layout.json");
  {
    std::ofstream out(path);
    out << R"({"format": "engram-hash-layout/1", "note": )" << Nested(200000)
        << R"(, "layers": [{"layer_id": 1}]})";
  }
  auto l = LoadLayerHashLayout(path, 1);
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("deeper than"), std::string::npos) << l.status().ToString();
  auto h = EngramHashLayout::FromFile(path, 0);
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
}

TEST(BoundedJson, DeepSafetensorsHeaderIsAnError) {
  const std::string json = R"({"__metadata__": {"x": )" + Nested(kMaxJsonDepth + 5, "\"y\"") + "}}";
  std::vector<std::byte> file(8 + json.size());
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) file[i] = std::byte(n >> (8 * i));
  std::memcpy(file.data() + 8, json.data(), json.size());
  auto h = ParseSafetensorsHeader(file, file.size());
  EXPECT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("deeper than"), std::string::npos) << h.status().ToString();
}

TEST(BoundedJson, MembersKeepsOnlyTheNamedTopLevelMembersAndChecksTheRest) {
  static constexpr std::string_view kKeep[] = {"b", "missing"};
  auto m = ParseBoundedJsonMembers(R"({"a": [1, {"x": 2}], "b": {"c": [3, 4]}, "d": "e"})", kKeep);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, (nlohmann::json{{"b", {{"c", {3, 4}}}}}));
  // The members not kept are still checked, and the whole must be an object.
  EXPECT_EQ(ParseBoundedJsonMembers(R"({"a": [1, }, "b": 1})", kKeep).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBoundedJsonMembers(R"({"a": 1e999999})", kKeep).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBoundedJsonMembers("[1, 2]", kKeep).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBoundedJsonMembers("\"b\"", kKeep).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBoundedJsonMembers("{} {}", kKeep).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseBoundedJsonMembers("{\"a\": " + Nested(kMaxJsonDepth + 1) + "}", kKeep).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseBoundedJsonMembers(" {\"a\": 1} ", kKeep), nlohmann::json::object());
}

TEST(BoundedJson, IndentLaysOutDumpedTextExactlyAsDumpDoes) {
  const nlohmann::json v = {{"a", {1, 2.5, -3, true, nullptr, "x\"y\\z"}},
                            {"b", nlohmann::json::object()},
                            {"c", nlohmann::json::array()},
                            {"d", {{"e", {{"f", "[{,:}]"}}}, {"g", {nlohmann::json::array(), {1}}}}},
                            {"h", "\xc3\xa9\\u0001"}};
  const std::string compact = v.dump();
  for (int indent : {1, 2, 4}) EXPECT_EQ(IndentJson(compact, indent), v.dump(indent)) << indent;
  // Whitespace in the text is not kept; scalars are.
  EXPECT_EQ(IndentJson(" { \"k\" :\n[ 1 ,2 ] , \"l\": { } }", 2), "{\n  \"k\": [\n    1,\n    2\n  ],\n  \"l\": {}\n}");
  EXPECT_EQ(IndentJson("7", 2), "7");
  // Written in pieces, the same text.
  std::string big = "[";
  for (int i = 0; i < 50000; ++i) big += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
  big += "]";
  std::string pieces;
  size_t calls = 0;
  IndentJson(big, 1, [&](std::string_view p) {
    pieces.append(p);
    ++calls;
  });
  EXPECT_EQ(pieces, nlohmann::json::parse(big).dump(1));
  EXPECT_GT(calls, 1u);
}

}  // namespace
}  // namespace engram
