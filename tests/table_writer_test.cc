// TableWriter's atomicity: a table appears under its name complete or not at
// all, and nothing that an interrupted writer leaves behind opens as a table.
#include "storage/table_writer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <filesystem>
#include <vector>

#include "src/tablegen/row_generator.h"
#include "storage/table_file.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

size_t FilesIn(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

std::vector<std::byte> Rows(uint64_t seed, uint64_t first, uint64_t n, uint32_t rb) {
  std::vector<std::byte> v(n * rb);
  GenerateRows(seed, first, n, rb, v);
  return v;
}

TableWriterOptions Opts(uint32_t rb = 264) {
  TableWriterOptions o;
  o.record_bytes = rb;
  o.sync = false;
  return o;
}

TEST(TableWriter, DestroyedBeforeFinishLeavesNoFile) {
  TempDir dir;
  {
    auto w = TableWriter::Create(dir.File("t.engram"), Opts());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->AppendRecords(Rows(1, 0, 100, 264)).ok());
    EXPECT_TRUE(fs::exists((*w)->temp_path()));
  }
  EXPECT_EQ(FilesIn(dir.path()), 0u);
}

TEST(TableWriter, AbandonRemovesTheTempFileAndRefusesMoreWork) {
  TempDir dir;
  auto w = TableWriter::Create(dir.File("t.engram"), Opts());
  ASSERT_TRUE(w.ok());
  (*w)->Abandon();
  EXPECT_EQ(FilesIn(dir.path()), 0u);
  EXPECT_FALSE((*w)->AppendRecords(Rows(1, 0, 1, 264)).ok());
  EXPECT_FALSE((*w)->Finish().ok());
  EXPECT_FALSE(fs::exists(dir.File("t.engram")));
}

TEST(TableWriter, TempFileOfAnUnfinishedWriteNeverOpens) {
  TempDir dir;
  auto w = TableWriter::Create(dir.File("t.engram"), Opts());
  ASSERT_TRUE(w.ok());
  for (uint64_t r = 0; r < 50000; r += 1000) ASSERT_TRUE((*w)->AppendRecords(Rows(1, r, 1000, 264)).ok());
  // Whatever has reached the temp file so far (as if the process died now),
  // even renamed to the final name, is not a table. The data goes out on the
  // writer's background thread: on a loaded host, wait (bounded) until some
  // of it has.
  for (int i = 0; i < 1000 && fs::file_size((*w)->temp_path()) <= 4096u; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fs::copy_file((*w)->temp_path(), dir.File("copy.engram"));
  ASSERT_GT(fs::file_size(dir.File("copy.engram")), 4096u);
  auto t = TableFile::Open(dir.File("copy.engram"));
  EXPECT_EQ(t.status().code(), StatusCode::kCorruption);
}

TEST(TableWriter, ProcessKilledMidWriteLeavesNoTable) {
  TempDir dir;
  std::string path = dir.File("t.engram");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto w = TableWriter::Create(path, Opts());
    if (!w.ok()) _exit(2);
    for (uint64_t r = 0; r < 20000; r += 1000) {
      if (!(*w)->AppendRecords(Rows(1, r, 1000, 264)).ok()) _exit(3);
    }
    _exit(0);  // dies without Finish and without running destructors
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(fs::exists(path));
  // The orphaned temp file is there, and does not open.
  size_t temps = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++temps;
    EXPECT_NE(e.path().filename().string().find(".tmp-"), std::string::npos);
    EXPECT_FALSE(TableFile::Open(e.path().string()).ok());
  }
  EXPECT_EQ(temps, 1u);
}

TEST(TableWriter, FinishReplacesAnExistingTableWhole) {
  TempDir dir;
  std::string path = dir.File("t.engram");
  for (uint64_t seed : {1u, 2u}) {
    auto w = TableWriter::Create(path, Opts());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->AppendRecords(Rows(seed, 0, 10 * seed, 264)).ok());
    if (seed == 2) {
      // Before Finish the old table is still there, intact.
      auto old = TableFile::Open(path);
      ASSERT_TRUE(old.ok());
      EXPECT_EQ((*old)->row_count(), 10u);
    }
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto t = TableFile::Open(path);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->row_count(), 20u);
  EXPECT_EQ(FilesIn(dir.path()), 1u);
}

TEST(TableWriter, FinishWithSyncProducesAReadableFile) {
  TempDir dir;
  TableWriterOptions o = Opts();
  o.sync = true;
  auto w = TableWriter::Create(dir.File("t.engram"), o);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->AppendRecords(Rows(3, 0, 40, 264)).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_EQ((*w)->header().row_count, 40u);
  EXPECT_TRUE(TableFile::Open(dir.File("t.engram")).ok());
  EXPECT_FALSE((*w)->Finish().ok());  // only once
}

TEST(TableWriter, RejectsPartialRecordsWithoutLosingState) {
  TempDir dir;
  auto w = TableWriter::Create(dir.File("t.engram"), Opts());
  ASSERT_TRUE(w.ok());
  std::vector<std::byte> odd(265);
  EXPECT_EQ((*w)->AppendRecords(odd).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE((*w)->AppendRecords(Rows(3, 0, 2, 264)).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto t = TableFile::Open(dir.File("t.engram"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->row_count(), 2u);
}

TEST(TableWriter, RejectsBadOptions) {
  TempDir dir;
  EXPECT_EQ(TableWriter::Create(dir.File("a"), Opts(0)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TableWriter::Create(dir.File("a"), Opts(4089)).status().code(), StatusCode::kInvalidArgument);
  TableWriterOptions o = Opts();
  o.metadata = nlohmann::json::array();
  EXPECT_EQ(TableWriter::Create(dir.File("a"), o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(TableWriter::Create(dir.File("no/such/dir/a"), Opts()).ok());
  EXPECT_FALSE(TableWriter::Create(dir.path() + "/", Opts()).ok());
  EXPECT_EQ(FilesIn(dir.path()), 0u);
}

}  // namespace
}  // namespace engram
