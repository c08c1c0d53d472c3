// engram-stress --table on a table it cannot check: the generator seed it
// reads from the metadata is not an unsigned integer. That is a non-zero exit
// with a message (exit 2, as for any setup error), never an uncaught
// json type_error.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "storage/table_writer.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using testing::TempDir;

void WriteTable(const std::string& path, uint64_t rows, nlohmann::json metadata) {
  TableWriterOptions o;
  o.record_bytes = 264;
  o.metadata = std::move(metadata);
  o.sync = false;
  auto w = TableWriter::Create(path, o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<std::byte> record(264);
  for (uint64_t r = 0; r < rows; ++r) ASSERT_TRUE((*w)->Append(record).ok());
  ASSERT_TRUE((*w)->Finish().ok());
}

struct ToolRun {
  int exit_code = -1;  // -1: killed by a signal
  std::string err;
};

ToolRun StressTable(const TempDir& dir, const std::string& table) {
  const std::string err_path = dir.File("err.txt");
  const std::string cmd = std::string(ENGRAM_TOOLS_DIR) + "/engram-stress --table '" + table +
                          "' --seconds 0 --threads 1 --json > /dev/null 2> '" + err_path + "'";
  const int status = std::system(cmd.c_str());
  ToolRun run;
  if (status != -1 && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  run.err = ss.str();
  return run;
}

TEST(StressTool, GeneratorSeedOfAnotherTypeIsAnErrorNotAnAbort) {
  TempDir dir;
  for (nlohmann::json seed : {nlohmann::json("7"), nlohmann::json(1.5), nlohmann::json::array({7})}) {
    const std::string path = dir.File("seed.engram");
    WriteTable(path, 100, {{"generator", {{"kind", "engram-gen"}, {"seed", seed}}}});
    ToolRun run = StressTable(dir, path);
    EXPECT_EQ(run.exit_code, 2) << seed.dump() << ": " << run.err;
    EXPECT_NE(run.err.find("seed"), std::string::npos) << seed.dump() << ": " << run.err;
  }
}

}  // namespace
}  // namespace engram
