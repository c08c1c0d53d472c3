// A live store's Prometheus exposition: valid for promtool, and every figure in
// it is the store's own counter (what an operator graphs is what happened).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "engram/store.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using testing::TempDir;

constexpr uint32_t kRecord = 264;
constexpr uint64_t kRows = 20000;

// The value of the sample whose line starts with `series ` (name and labels
// exactly as exposed), or NaN if there is none.
double Sample(const std::string& text, const std::string& series) {
  const std::string key = series + " ";
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (text.compare(pos, key.size(), key) == 0) return std::stod(text.substr(pos + key.size(), end - pos));
    pos = end + 1;
  }
  return std::nan("");
}

// Sum of every sample of a family with this label prefix (e.g. all reasons).
double SumOf(const std::string& text, const std::string& prefix) {
  double sum = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (text.compare(pos, prefix.size(), prefix) == 0) {
      sum += std::stod(text.substr(text.rfind(' ', end) + 1, end));
    }
    pos = end + 1;
  }
  return sum;
}

// Runs `promtool check metrics` on text; returns its exit status and output.
std::pair<int, std::string> Promtool(const std::string& text, const std::string& dir) {
  const std::string path = dir + "/metrics.txt";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return {-1, "cannot write " + path};
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  FILE* p = popen(("promtool check metrics < " + path + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  return {pclose(p), out};
}

TEST(StoreMetrics, LiveExpositionPassesPromtoolAndEqualsTheStoresCounters) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (scripts/install-deps.sh installs it)";
  }
  TempDir dir;
  const std::string path = dir.File("t.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(path, kRows, kRecord, 3).ok());
  StoreOptions o;
  // A label value that needs escaping: quote, backslash.
  o.tables.push_back({path, "layer \"1\" \\ a", 0});
  o.cache_bytes = 2u << 20;  // a few thousand rows: evictions and refusals happen
  o.cache_policy = "legacy";
  o.io_backend = "pread";
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string label = "{table=\"layer \\\"1\\\" \\\\ a\"}";

  const std::string before = (*store)->MetricsText();
  EXPECT_EQ(Sample(before, "engram_row_cache_lookups_total" + label), 0.0) << before;

  std::mt19937_64 rng(7);
  std::vector<uint64_t> ids(2000);
  std::vector<std::byte> dst(ids.size() * kRecord);
  for (int g = 0; g < 20; ++g) {
    for (auto& id : ids) id = rng() % (g % 2 ? kRows : 3000);  // a hot range and the whole table
    GatherResult r = (*store)->Gather(0, ids, dst.data(), kRecord);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  }
  std::vector<uint64_t> ahead{1, 2, 3, 19999};
  ASSERT_TRUE((*store)->ReadAhead(0, ahead).ok());
  (*store)->WaitForReadAheads();
  (*store)->ReleaseReadAhead(0, ahead);
  std::vector<uint64_t> bad{kRows + 5};
  EXPECT_FALSE((*store)->Gather(0, bad, dst.data(), kRecord).status.ok());

  const std::string text = (*store)->MetricsText();
  auto [rc, out] = Promtool(text, dir.path());
  EXPECT_EQ(rc, 0) << out << "\n" << text;

  const TableStats s = (*store)->Stats(0);
  ASSERT_GT(s.cache.total_refusals(), 0u) << "the workload must exercise refusals";
  ASSERT_GT(s.cache.evictions, 0u);
  EXPECT_EQ(Sample(text, "engram_row_cache_lookups_total" + label), double(s.cache.lookups));
  EXPECT_EQ(Sample(text, "engram_row_cache_hits_total" + label), double(s.cache.hits));
  EXPECT_EQ(Sample(text, "engram_row_cache_misses_total" + label), double(s.cache.misses));
  EXPECT_EQ(Sample(text, "engram_row_cache_inserts_total" + label), double(s.cache.inserts));
  EXPECT_EQ(Sample(text, "engram_row_cache_evictions_total" + label), double(s.cache.evictions));
  const std::string refusal_prefix = "engram_row_cache_refusals_total{table=\"layer \\\"1\\\" \\\\ a\",reason=";
  EXPECT_EQ(SumOf(text, refusal_prefix), double(s.cache.total_refusals())) << text;
  EXPECT_EQ(Sample(text, "engram_row_cache_resident_rows" + label), double(s.cache.resident_rows));
  EXPECT_EQ(Sample(text, "engram_gathers_total" + label), double(s.gathers));
  EXPECT_EQ(Sample(text, "engram_gather_failures_total" + label), double(s.failed_gathers));
  EXPECT_EQ(Sample(text, "engram_read_ahead_rows_total" + label), double(s.read_ahead_rows));
  EXPECT_EQ(Sample(text, "engram_read_ahead_rows_wasted_total" + label), double(s.read_ahead_wasted_rows));
  EXPECT_EQ(Sample(text, "engram_io_reads_total" + label), double(s.io_reads));
  EXPECT_EQ(Sample(text, "engram_io_read_bytes_total" + label), double(s.io_bytes));
  EXPECT_NEAR(Sample(text, "engram_readiness_wait_cache_seconds_total" + label), double(s.readiness_wait_cache_nanoseconds) * 1e-9,
              1e-6);
  EXPECT_NEAR(Sample(text, "engram_readiness_wait_disk_seconds_total" + label), double(s.readiness_wait_disk_nanoseconds) * 1e-9,
              1e-6);
  // Counters moved between the two scrapes.
  EXPECT_GT(Sample(text, "engram_io_reads_total" + label), Sample(before, "engram_io_reads_total" + label));
}

}  // namespace
}  // namespace engram
