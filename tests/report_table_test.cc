// The report's table: counts grouped by thousands, as the demo prints them.
#include "src/workload/report_table.h"

#include <gtest/gtest.h>

#include <string>

namespace engram {
namespace {

TEST(ReportTableTest, GroupsEveryCountByThousands) {
  RequestRunStats s;
  s.name = "A";
  s.evictions = 1234567;
  s.refusals = 999;
  s.rows = 4000;
  s.wall_seconds = 1.0;
  s.resident_rows = 1000;
  s.capacity_rows = 10000000;
  const std::string table = FormatReportTable({{"legacy", {s}}});
  EXPECT_NE(table.find("1,234,567"), std::string::npos) << table;
  EXPECT_NE(table.find(" 999 "), std::string::npos) << table;
  EXPECT_NE(table.find("4,000"), std::string::npos) << table;  // rows per second
  EXPECT_NE(table.find("1,000 of 10,000,000 slots filled"), std::string::npos) << table;
  EXPECT_EQ(table.find(",,"), std::string::npos) << table;
}

TEST(ReportTableTest, ZeroAndSmallCountsHaveNoSeparator) {
  RequestRunStats s;
  s.name = "B";
  s.evictions = 0;
  s.refusals = 12;
  s.resident_rows = 123;
  s.capacity_rows = 100000;
  const std::string table = FormatReportTable({{"default", {s}}});
  EXPECT_NE(table.find("123 of 100,000 slots filled"), std::string::npos) << table;
  EXPECT_EQ(table.find(",1"), std::string::npos) << table;  // no separator before a short group
}

}  // namespace
}  // namespace engram
