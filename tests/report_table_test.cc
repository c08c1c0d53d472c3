// The report's table: counts grouped by thousands, as the demo prints them.
#include "src/workload/report_table.h"

#include <gtest/gtest.h>

#include <string>

namespace engram {
namespace {

// One request's figures, with the counts the table prints grouped.
std::string TableOf(uint64_t evictions, uint64_t refusals, uint64_t rows_per_second, uint64_t resident,
                    uint64_t capacity) {
  RequestRunStats s;
  s.name = "A";
  s.evictions = evictions;
  s.refusals = refusals;
  s.rows = rows_per_second;
  s.wall_seconds = 1.0;
  s.resident_rows = resident;
  s.capacity_rows = capacity;
  return FormatReportTable({{"legacy", {s}}});
}

TEST(ReportTableTest, GroupsEveryCountByThousands) {
  const std::string table = TableOf(1234567, 999, 4000, 1000, 10000000);
  EXPECT_NE(table.find("1,234,567"), std::string::npos) << table;
  EXPECT_NE(table.find(" 999 "), std::string::npos) << table;
  EXPECT_NE(table.find("4,000"), std::string::npos) << table;
  EXPECT_NE(table.find("1,000 of 10,000,000 slots filled"), std::string::npos) << table;
  EXPECT_EQ(table.find(",,"), std::string::npos) << table;
}

TEST(ReportTableTest, ZeroAndSmallCountsHaveNoSeparator) {
  const std::string table = TableOf(0, 12, 0, 123, 100000);
  EXPECT_NE(table.find("123 of 100,000 slots filled"), std::string::npos) << table;
  EXPECT_EQ(table.find(",1"), std::string::npos) << table;  // no separator before a short group
}

}  // namespace
}  // namespace engram
