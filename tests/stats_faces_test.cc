// The statistics have four faces -- the C++ structs, the C API's structs, the
// Prometheus exposition and the Python binding (python/tests/test_stats_faces.py)
// -- and every face must carry every statistic of the tables in
// engram/cache_stats.h and engram/counters.h, no more and no less, with the
// same values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engram/engram.h"
#include "engram/store.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using testing::TempDir;

constexpr uint32_t kRecord = 264;
constexpr uint64_t kRows = 20000;

// One field of a C struct: its name and where it is.
struct CField {
  std::string name;
  size_t offset;
};

// Every field of engram_table_stats that the tables define, by name.
std::vector<CField> TableStatsFieldsFromTheTables() {
  std::vector<CField> fields;
#define CACHE_FIELD_COUNTER(member) fields.push_back({#member, offsetof(engram_table_stats, member)});
#define CACHE_FIELD_GAUGE(member) fields.push_back({#member, offsetof(engram_table_stats, member)});
#define REASON_FIELD(enumerator, name, help) \
  fields.push_back({"refusals_" #name, offsetof(engram_table_stats, refusals_##name)});
#define CACHE_FIELD_BY_REASON(member)                                    \
  fields.push_back({#member, offsetof(engram_table_stats, member)}); \
  ENGRAM_REFUSAL_REASONS(REASON_FIELD)
#define CACHE_X(member, metric, kind, help) CACHE_FIELD_##kind(member)
  ENGRAM_CACHE_STATS(CACHE_X)
#define COUNTER_X(member, metric, unit, help) fields.push_back({#member, offsetof(engram_table_stats, member)});
  ENGRAM_TABLE_COUNTERS(COUNTER_X)
#undef COUNTER_X
#undef CACHE_X
#undef CACHE_FIELD_BY_REASON
#undef REASON_FIELD
#undef CACHE_FIELD_GAUGE
#undef CACHE_FIELD_COUNTER
  return fields;
}

uint64_t FieldValue(const engram_table_stats& s, const CField& f) {
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const char*>(&s) + f.offset, sizeof v);
  return v;
}

// The families of a Prometheus text exposition: name -> type.
std::map<std::string, std::string> Families(const std::string& text) {
  std::map<std::string, std::string> families;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream words(line.substr(7));
    std::string name, type;
    words >> name >> type;
    families[name] = type;
  }
  return families;
}

// The value of the sample `series` (name and labels exactly as exposed), or NaN.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nan("");
}

// A store through the C API with every kind of event behind it: hits,
// misses, evictions, refusals, read-ahead (pinned and released), a failed gather.
class StatsFacesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("faces.engram");
    ASSERT_TRUE(testing::WriteGeneratedTable(path_, kRows, kRecord, 3).ok());
    const char* paths[] = {path_.c_str()};
    engram_store_options o{};
    o.size = sizeof o;
    o.table_paths = paths;
    o.table_count = 1;
    o.cache_bytes = 2u << 20;  // a few thousand rows: evictions and refusals happen
    o.cache_policy = "legacy,sets=2,relocate=2";
    o.io_backend = "pread";
    ASSERT_EQ(engram_store_open(&o, &store_), ENGRAM_OK) << engram_last_error();
    std::vector<uint64_t> ids(2000);
    std::vector<std::byte> dst(ids.size() * kRecord);
    uint64_t x = 7;
    for (int g = 0; g < 20; ++g) {
      for (auto& id : ids) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        id = (x >> 33) % (g % 2 ? kRows : 3000);
      }
      engram_gather_result r{};
      r.size = sizeof r;
      ASSERT_EQ(engram_gather_rows(store_, 0, ids.data(), ids.size(), dst.data(), kRecord, &r), ENGRAM_OK)
          << engram_last_error();
    }
    const uint64_t ahead[] = {1, 2, 3, 19999};
    ASSERT_EQ(engram_read_ahead(store_, 0, ahead, 4), ENGRAM_OK);
    engram_read_ahead_wait(store_);
    engram_read_ahead_release(store_, 0, ahead, 2);  // two stay pinned
    const uint64_t bad = kRows + 5;
    engram_gather_result r{};
    r.size = sizeof r;
    EXPECT_NE(engram_gather_rows(store_, 0, &bad, 1, dst.data(), kRecord, &r), ENGRAM_OK);
  }
  void TearDown() override { engram_store_close(store_); }

  std::string MetricsText() const {
    std::string text(engram_metrics_text(store_, nullptr, 0) + 1, '\0');
    text.resize(engram_metrics_text(store_, text.data(), text.size()));
    return text;
  }

  TempDir dir_;
  std::string path_;
  engram_store* store_ = nullptr;
};

TEST_F(StatsFacesTest, EveryCFieldOfTheTableStatsIsAStatisticOfTheTablesWithTheExposedValue) {
  engram_table_stats s{};
  s.size = sizeof s;
  ASSERT_EQ(engram_table_stats_get(store_, 0, &s), ENGRAM_OK) << engram_last_error();
  const std::string text = MetricsText();
  const std::string label = "{table=\"faces\"";

  // The fields the tables name tile the struct after its fixed head: the C
  // struct has no field the tables do not define.
  std::vector<CField> fields = TableStatsFieldsFromTheTables();
  std::sort(fields.begin(), fields.end(), [](const CField& a, const CField& b) { return a.offset < b.offset; });
  size_t expected_offset = offsetof(engram_table_stats, record_bytes) + sizeof(uint32_t);
  expected_offset = (expected_offset + alignof(uint64_t) - 1) / alignof(uint64_t) * alignof(uint64_t);
  for (const CField& f : fields) {
    EXPECT_EQ(f.offset, expected_offset) << f.name << " is not where the tables put it";
    expected_offset = f.offset + sizeof(uint64_t);
  }
  EXPECT_EQ(sizeof(engram_table_stats), expected_offset) << "engram_table_stats has fields the tables do not define";

  // Each field holds what the exposition says for the same statistic.
  std::map<std::string, uint64_t> c_values;
  for (const CField& f : fields) c_values[f.name] = FieldValue(s, f);
  for (const CacheStatInfo& stat : kCacheStats) {
    if (stat.kind == CacheStatKind::kByReason) {
      uint64_t total = 0;
      for (const RefusalReasonInfo& reason : kRefusalReasons) {
        const std::string field = std::string(stat.name) + "_" + reason.name;
        EXPECT_EQ(double(c_values.at(field)),
                  Sample(text, std::string(stat.metric) + label + ",reason=\"" + reason.name + "\"}"))
            << field;
        total += c_values.at(field);
      }
      EXPECT_EQ(c_values.at(stat.name), total) << stat.name << " is not the sum over its reasons";
    } else {
      EXPECT_EQ(double(c_values.at(stat.name)), Sample(text, std::string(stat.metric) + label + "}")) << stat.name;
    }
  }
  for (const TableCounterInfo& counter : kTableCounters) {
    const double exposed = Sample(text, std::string(counter.metric) + label + "}");
    if (counter.unit == ENGRAM_UNIT_NANOSECONDS) {
      EXPECT_NEAR(double(c_values.at(counter.name)) * 1e-9, exposed, 1e-6) << counter.name;
    } else {
      EXPECT_EQ(double(c_values.at(counter.name)), exposed) << counter.name;
    }
  }
  // The workload reached the statistics that are easy to leave unfilled.
  EXPECT_GT(s.relocations, 0u);
  EXPECT_GT(s.pinned_inserts, 0u);
  EXPECT_EQ(s.pinned_rows, 2u);
  EXPECT_GT(s.memory_bytes, s.overhead_bytes);
  EXPECT_GT(s.refusals_lost_admission, 0u);
}

TEST_F(StatsFacesTest, EveryTableFamilyOfTheExpositionIsAStatisticOfTheTablesAndEveryStatisticIsExposed) {
  const std::map<std::string, std::string> families = Families(MetricsText());
  std::map<std::string, std::string> from_tables;
  for (const CacheStatInfo& stat : kCacheStats) {
    from_tables[stat.metric] = stat.kind == CacheStatKind::kGauge ? "gauge" : "counter";
  }
  for (const TableCounterInfo& counter : kTableCounters) from_tables[counter.metric] = "counter";
  for (const auto& [metric, type] : from_tables) {
    auto it = families.find(metric);
    ASSERT_NE(it, families.end()) << metric << " is in the tables but not exposed";
    EXPECT_EQ(it->second, type) << metric;
  }
  // What the exposition has beyond the tables: the store's, not a table
  // statistic's (build and I/O latency), and the table's budget share, which
  // the store sets rather than counts.
  const std::set<std::string> not_statistics = {"engram_build_info", "engram_io_read_latency_seconds",
                                                "engram_row_cache_budget_bytes"};
  for (const auto& [family, type] : families) {
    EXPECT_TRUE(from_tables.count(family) || not_statistics.count(family))
        << family << " is exposed but is in neither engram/cache_stats.h nor engram/counters.h";
  }
}

TEST_F(StatsFacesTest, EveryCFieldOfTheGatherResultIsAFieldOfTheCxxResultWithItsValue) {
  std::vector<CField> fields;
#define ENGRAM_X(member, help) fields.push_back({#member, offsetof(engram_gather_result, member)});
  ENGRAM_GATHER_RESULT(ENGRAM_X)
#undef ENGRAM_X
  size_t expected_offset = sizeof(size_t);
  for (const CField& f : fields) {
    EXPECT_EQ(f.offset, expected_offset) << f.name;
    expected_offset += sizeof(uint64_t);
  }
  EXPECT_EQ(sizeof(engram_gather_result), expected_offset) << "engram_gather_result has fields the table does not define";
  ASSERT_EQ(std::size(kGatherResultFields), fields.size());

  // The same gather on two fresh stores over the same table, one through C,
  // one through C++: every count agrees, every time is set.
  StoreOptions o;
  o.tables.push_back({path_, "", 0});
  o.cache_bytes = 2u << 20;
  o.io_backend = "pread";
  auto cxx = Store::Open(o);
  ASSERT_TRUE(cxx.ok()) << cxx.status().ToString();
  const char* paths[] = {path_.c_str()};
  engram_store_options co{};
  co.size = sizeof co;
  co.table_paths = paths;
  co.table_count = 1;
  co.cache_bytes = o.cache_bytes;
  co.io_backend = "pread";
  engram_store* c = nullptr;
  ASSERT_EQ(engram_store_open(&co, &c), ENGRAM_OK) << engram_last_error();
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 300; ++i) ids.push_back(i * 7 % 1000);
  std::vector<std::byte> dst(ids.size() * kRecord);
  for (int round = 0; round < 2; ++round) {  // misses, then hits
    const GatherResult expected = (*cxx)->Gather(0, ids, dst.data(), kRecord);
    ASSERT_TRUE(expected.status.ok()) << expected.status.ToString();
    engram_gather_result got{};
    got.size = sizeof got;
    ASSERT_EQ(engram_gather_rows(c, 0, ids.data(), ids.size(), dst.data(), kRecord, &got), ENGRAM_OK);
    for (size_t i = 0; i < fields.size(); ++i) {
      ASSERT_EQ(fields[i].name, kGatherResultFields[i].name);
      uint64_t value;
      std::memcpy(&value, reinterpret_cast<const char*>(&got) + fields[i].offset, sizeof value);
      const std::string name = fields[i].name;
      if (name.ends_with("_nanoseconds")) {
        if (name == "wait_nanoseconds") {
          EXPECT_GT(value, 0u) << name;
        }
        continue;
      }
      EXPECT_EQ(value, expected.*kGatherResultFields[i].member) << name << " in round " << round;
    }
  }
  engram_store_close(c);
}

// A caller built against an older engram.h passes a shorter struct: every
// field it knows must stay where it was. These are the fields and the order
// of the first engram_table_stats; later fields only ever follow them.
TEST(CapiLayout, TableStatsKeepsEveryFieldOfTheFirstReleaseWhereItWas) {
  const size_t first_release[] = {
      offsetof(engram_table_stats, lookups),
      offsetof(engram_table_stats, hits),
      offsetof(engram_table_stats, misses),
      offsetof(engram_table_stats, inserts),
      offsetof(engram_table_stats, evictions),
      offsetof(engram_table_stats, refusals),
      offsetof(engram_table_stats, refusals_lost_admission),
      offsetof(engram_table_stats, refusals_all_pinned),
      offsetof(engram_table_stats, relocations),
      offsetof(engram_table_stats, capacity_rows),
      offsetof(engram_table_stats, resident_rows),
      offsetof(engram_table_stats, pinned_rows),
      offsetof(engram_table_stats, gathers),
      offsetof(engram_table_stats, failed_gathers),
      offsetof(engram_table_stats, rows_requested),
      offsetof(engram_table_stats, failed_rows),
      offsetof(engram_table_stats, readiness_wait_nanoseconds),
      offsetof(engram_table_stats, readiness_wait_cache_nanoseconds),
      offsetof(engram_table_stats, readiness_wait_disk_nanoseconds),
      offsetof(engram_table_stats, read_ahead_rows),
      offsetof(engram_table_stats, read_ahead_used_rows),
      offsetof(engram_table_stats, read_ahead_wasted_rows),
      offsetof(engram_table_stats, io_reads),
      offsetof(engram_table_stats, io_bytes),
      offsetof(engram_table_stats, io_errors),
      offsetof(engram_table_stats, checksum_failures),
  };
  EXPECT_EQ(offsetof(engram_table_stats, row_count), sizeof(size_t));
  EXPECT_EQ(offsetof(engram_table_stats, record_bytes), sizeof(size_t) + sizeof(uint64_t));
  for (size_t i = 0; i < std::size(first_release); ++i) {
    EXPECT_EQ(first_release[i], sizeof(size_t) + 2 * sizeof(uint64_t) + i * sizeof(uint64_t)) << "field " << i;
  }
}

TEST(CapiLayout, GatherResultKeepsEveryFieldOfTheFirstReleaseWhereItWas) {
  const size_t first_release[] = {
      offsetof(engram_gather_result, rows),           offsetof(engram_gather_result, distinct_rows),
      offsetof(engram_gather_result, hits),           offsetof(engram_gather_result, misses),
      offsetof(engram_gather_result, inserts),        offsetof(engram_gather_result, refusals),
      offsetof(engram_gather_result, read_ahead_used), offsetof(engram_gather_result, blocks_read),
      offsetof(engram_gather_result, bytes_read),     offsetof(engram_gather_result, wait_nanoseconds),
      offsetof(engram_gather_result, cache_nanoseconds), offsetof(engram_gather_result, disk_nanoseconds),
  };
  for (size_t i = 0; i < std::size(first_release); ++i) {
    EXPECT_EQ(first_release[i], sizeof(size_t) + i * sizeof(uint64_t)) << "field " << i;
  }
}

}  // namespace
}  // namespace engram
