// engram-replay's trace side: request/split parsing, chunking, per-gather
// dedup, trace files, size and sweep arguments.
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engram/hasher.h"
#include "src/replay/cli_values.h"
#include "src/replay/gather_trace.h"
#include "src/replay/request_spec.h"
#include "src/replay/trace_files.h"

namespace engram::replay {
namespace {

const std::string kFixtures = ENGRAM_FIXTURE_DIR;

TEST(SplitSpecTest, ParsesTokensPerChunkAndEqualChunks) {
  auto n = SplitSpec::Parse("4096");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->kind, SplitSpec::Kind::kChunkTokens);
  EXPECT_EQ(n->value, 4096u);
  auto x = SplitSpec::Parse("x12");
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->kind, SplitSpec::Kind::kEqualChunks);
  EXPECT_EQ(x->value, 12u);
  EXPECT_EQ(x->ToString(), "x12");
  for (const char* bad : {"", "x", "0", "x0", "12a", "-4", "x-1", "1.5"})
    EXPECT_FALSE(SplitSpec::Parse(bad).ok()) << bad;
}

TEST(RequestSpecTest, DefaultSplitIs4096TokenChunksAndLastAtSeparates) {
  auto r = RequestSpec::Parse("dir/req2.u32");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->path, "dir/req2.u32");
  EXPECT_EQ(r->split.kind, SplitSpec::Kind::kChunkTokens);
  EXPECT_EQ(r->split.value, 4096u);
  r = RequestSpec::Parse("a@b/req1.u32@x12");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->path, "a@b/req1.u32");
  EXPECT_EQ(r->split.value, 12u);
  EXPECT_FALSE(RequestSpec::Parse("req1.u32@").ok());
  EXPECT_FALSE(RequestSpec::Parse("@x3").ok());
}

TEST(SplitSpecTest, BoundariesCoverTheRequestExactly) {
  EXPECT_EQ((SplitSpec{SplitSpec::Kind::kChunkTokens, 4}).Boundaries(10), (std::vector<size_t>{0, 4, 8, 10}));
  EXPECT_EQ((SplitSpec{SplitSpec::Kind::kChunkTokens, 5}).Boundaries(10), (std::vector<size_t>{0, 5, 10}));
  EXPECT_EQ((SplitSpec{SplitSpec::Kind::kEqualChunks, 3}).Boundaries(10), (std::vector<size_t>{0, 4, 8, 10}));
  EXPECT_EQ((SplitSpec{SplitSpec::Kind::kEqualChunks, 16}).Boundaries(60000).size(), 17u);
  // 20,000 tokens in 12 chunks: 11 of 1667 and a last one of 1663.
  auto b = (SplitSpec{SplitSpec::Kind::kEqualChunks, 12}).Boundaries(20000);
  ASSERT_EQ(b.size(), 13u);
  for (size_t i = 0; i + 2 < b.size(); ++i) EXPECT_EQ(b[i + 1] - b[i], 1667u);
  EXPECT_EQ(b[12] - b[11], 1663u);
  // More chunks than tokens: no empty gathers.
  EXPECT_EQ((SplitSpec{SplitSpec::Kind::kEqualChunks, 5}).Boundaries(2), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ((SplitSpec{SplitSpec::Kind::kEqualChunks, 4}).Boundaries(5), (std::vector<size_t>{0, 2, 4, 5}));
  EXPECT_EQ((SplitSpec{SplitSpec::Kind::kChunkTokens, 4}).Boundaries(0), (std::vector<size_t>{0}));
}

TEST(GatherTraceTest, AddGatherKeepsFirstOccurrenceOrderOfDistinctRows) {
  GatherTrace t;
  std::vector<uint64_t> g1 = {5, 3, 5, 9, 3, 3, 1};
  std::vector<uint64_t> g2 = {3, 3};
  t.AddGather(g1);
  t.AddGather(g2);
  t.EndRequest("a");
  t.AddGather(g1);
  t.EndRequest("b");
  EXPECT_EQ(t.rows, (std::vector<uint64_t>{5, 3, 9, 1, 3, 5, 3, 9, 1}));
  EXPECT_EQ(t.gather_end, (std::vector<uint64_t>{4, 5, 9}));
  EXPECT_EQ(t.request_end, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(t.request_names, (std::vector<std::string>{"a", "b"}));
}

TEST(GatherTraceTest, DedupHandlesLargeGathersAndRowIdZero) {
  std::mt19937_64 rng(1);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 100000; ++i) ids.push_back(rng() % 30000);
  ids.push_back(0);
  GatherTrace t;
  t.AddGather(ids);
  t.AddGather(std::vector<uint64_t>{0, 0});
  std::vector<uint64_t> expected;
  std::vector<bool> seen(30000);
  for (uint64_t id : ids)
    if (!seen[id]) seen[id] = true, expected.push_back(id);
  ASSERT_EQ(t.gather_end[0], expected.size());
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), t.rows.begin()));
  EXPECT_EQ(t.gather_end[1] - t.gather_end[0], 1u);
}

NgramHasher V41Identity() {
  auto layout = EngramHashLayout::FromFile(kFixtures + "/engram-hash/layout-v41.json", 0);
  EXPECT_TRUE(layout.ok());
  auto h = NgramHasher::Create(*layout);
  EXPECT_TRUE(h.ok());
  return std::move(*h);
}

TEST(GatherTraceTest, ChunkedRequestHasTheSameRowsAsTheWholeRequest) {
  const NgramHasher hasher = V41Identity();
  auto tokens = ReadTokenFile(kFixtures + "/engram-hash/vectors/english_2000.tokens.u32");
  ASSERT_TRUE(tokens.ok());
  std::vector<std::vector<uint32_t>> requests = {*tokens};
  std::vector<std::string> names = {"english"};
  auto whole = hasher.Hash(*tokens);
  ASSERT_TRUE(whole.ok());
  for (SplitSpec split : {SplitSpec{SplitSpec::Kind::kEqualChunks, 7}, SplitSpec{SplitSpec::Kind::kChunkTokens, 300}}) {
    auto trace = BuildTraceFromTokens(hasher, requests, std::span(&split, 1), names);
    ASSERT_TRUE(trace.ok());
    const auto bounds = split.Boundaries(tokens->size());
    ASSERT_EQ(trace->gathers(), bounds.size() - 1);
    // Each gather = the distinct rows of that slice of the whole-request hash.
    for (size_t g = 0; g < trace->gathers(); ++g) {
      GatherTrace expect;
      expect.AddGather(std::span<const uint64_t>(*whole).subspan(bounds[g] * 24, (bounds[g + 1] - bounds[g]) * 24));
      EXPECT_TRUE(std::equal(expect.rows.begin(), expect.rows.end(), trace->rows.begin() + trace->gather_begin(g),
                             trace->rows.begin() + trace->gather_end[g]))
          << "gather " << g;
    }
  }
}

TEST(GatherTraceTest, EveryRequestStartsFromPad) {
  // The same tokens as two requests give the same rows twice: no n-gram reaches
  // into the previous request.
  const NgramHasher hasher = V41Identity();
  std::vector<std::vector<uint32_t>> requests = {{100, 200, 300}, {100, 200, 300}};
  std::vector<SplitSpec> splits(2);
  std::vector<std::string> names = {"a", "b"};
  auto trace = BuildTraceFromTokens(hasher, requests, splits, names);
  ASSERT_TRUE(trace.ok());
  ASSERT_EQ(trace->requests(), 2u);
  const size_t half = trace->gather_end[0];
  ASSERT_EQ(trace->rows.size(), 2 * half);
  EXPECT_TRUE(std::equal(trace->rows.begin(), trace->rows.begin() + half, trace->rows.begin() + half));
}

TEST(TraceFilesTest, RowTraceRoundTripsAndEachLineIsAGather) {
  const std::string path = ::testing::TempDir() + "/rows.txt";
  std::vector<uint64_t> rows = {0, 18446744073709551615ull, 7, 7};
  ASSERT_TRUE(WriteRowTrace(path, rows).ok());
  auto back = ReadRowTrace(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, rows);
  GatherTrace t = TraceFromRows(*back, "rows");
  EXPECT_EQ(t.gathers(), 4u);
  EXPECT_EQ(t.rows, rows);  // a repeat in the next line is a new gather, not deduplicated
  std::remove(path.c_str());
}

TEST(TraceFilesTest, BadRowTraceLinesAreNamed) {
  const std::string path = ::testing::TempDir() + "/bad-rows.txt";
  {
    std::ofstream out(path);
    out << "12\r\n13\n\n14\n";
  }
  auto r = ReadRowTrace(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("line 3"), std::string::npos) << r.status().ToString();
  {
    std::ofstream out(path);
    out << "12\n-3\n";
  }
  EXPECT_NE(ReadRowTrace(path).status().message().find("line 2"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_EQ(ReadRowTrace("/nonexistent/rows.txt").status().code(), StatusCode::kNotFound);
}

TEST(TraceFilesTest, TokenFileMustBeWholeUint32s) {
  const std::string path = ::testing::TempDir() + "/tokens.u32";
  {
    std::ofstream out(path, std::ios::binary);
    out.write("\x01\x00\x00\x00\x02", 5);
  }
  EXPECT_EQ(ReadTokenFile(path).status().code(), StatusCode::kCorruption);
  std::remove(path.c_str());
}

TEST(CliValuesTest, SizesAcceptBinarySuffixes) {
  EXPECT_EQ(*ParseSize("1073741824"), 1073741824u);
  EXPECT_EQ(*ParseSize("1G"), 1ull << 30);
  EXPECT_EQ(*ParseSize("1GiB"), 1ull << 30);
  EXPECT_EQ(*ParseSize("512K"), 512u << 10);
  EXPECT_EQ(*ParseSize("64MiB"), 64ull << 20);
  EXPECT_EQ(*ParseSize("1.5G"), 3ull << 29);
  for (const char* bad : {"", "G", "1X", "-1G", "1 G", "nanG"}) EXPECT_FALSE(ParseSize(bad).ok()) << bad;
}

TEST(CliValuesTest, SweepMultiplesAndExplicitRows) {
  auto s = ParseSweep("0.25,0.5,1,2", 1398612);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (std::vector<uint64_t>{349653, 699306, 1398612, 2797224}));
  s = ParseSweep("100000,1.5x", 1000);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (std::vector<uint64_t>{100000, 1500}));
  EXPECT_FALSE(ParseSweep("0.5", 0).ok());  // a multiple needs a base capacity
  EXPECT_FALSE(ParseSweep("1,,2", 10).ok());
  EXPECT_FALSE(ParseSweep("0.01", 10).ok());  // below one row
  // Beyond 2^64 rows the conversion to a count would be undefined: refused.
  s = ParseSweep("1e30", 10);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("too large"), std::string::npos) << s.status().ToString();
  EXPECT_FALSE(ParseSweep("1e19x", 10).ok());
}

}  // namespace
}  // namespace engram::replay
