// Nothing a process writes replaces a file it reads (storage/input_files.h):
// every writer -- a table, a converted table, a file written atomically --
// refuses an output that is, by name, symlink or hard link, a table the
// process has open or a file it read, and writes it once the table is
// closed. A record whose own path no longer names its file (removed, or
// replaced) refuses nothing: its inode number may since belong to another
// file. And the temporary files of an output: a writer's is locked while it
// lives, and the next writer of the output removes only those no live writer
// holds, of exactly its own pattern.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engram/hasher.h"
#include "storage/file_util.h"
#include "storage/input_files.h"
#include "storage/table_converter.h"
#include "storage/table_file.h"
#include "storage/table_writer.h"
#include "tests/testing/npy_file.h"
#include "tests/testing/safetensors_file.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr uint32_t kRecord = 264;

void ExpectRefused(const Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << "'" << needle << "' not in: " << s.ToString();
}

Status WriteTableAt(const std::string& path) {
  TableWriterOptions o;
  o.record_bytes = kRecord;
  o.sync = false;
  auto w = TableWriter::Create(path, o);
  if (!w.ok()) return w.status();
  ENGRAM_RETURN_IF_ERROR((*w)->AppendRecords(testing::ExpectedRow(3, 0, kRecord)));
  return (*w)->Finish();
}

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class InputFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    table_ = dir_.File("t.engram");
    ASSERT_TRUE(testing::WriteGeneratedTable(table_, 100, kRecord, 7).ok());
  }
  TempDir dir_;
  std::string table_;
};

TEST_F(InputFiles, EveryWriterRefusesATableThisProcessHasOpenAndWritesItOnceClosed) {
  const std::string before = ReadBytes(table_);
  auto open = TableFile::Open(table_);
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  ExpectRefused(WriteTableAt(table_), "output table " + table_ + " is the same file as " + table_ + " (a table file");
  ExpectRefused(fileutil::WriteFileAtomically(table_, "{}", "the rank manifest"), "is the same file as " + table_);
  testing::WriteFile(dir_.File("w.npy"),
                     testing::Npy(testing::Dict("|u1", "(10, 264)"), testing::Rows(1, 0, 10, kRecord)));
  auto spec = NpyConvertSpec({dir_.File("w.npy")}, {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ExpectRefused(ConvertToTable(*spec, table_, ConvertOptions()).status(), "is the same file as " + table_);
  EXPECT_EQ(ReadBytes(table_), before) << "a refused writer changed the table";
  for (const auto& e : fs::directory_iterator(dir_.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
  open->reset();
  EXPECT_TRUE(WriteTableAt(table_).ok()) << "a closed table is no input";
}

TEST_F(InputFiles, ASymlinkOrAHardLinkToAnInputIsThatInput) {
  auto open = TableFile::Open(table_);
  ASSERT_TRUE(open.ok());
  fs::create_symlink(table_, dir_.File("symlink.engram"));
  fs::create_hard_link(table_, dir_.File("hardlink.engram"));
  for (const char* name : {"symlink.engram", "hardlink.engram"}) {
    ExpectRefused(WriteTableAt(dir_.File(name)), "is the same file as " + table_);
    ExpectRefused(CheckOutputPath(dir_.File(name), "hot_set_path"), "hot_set_path " + dir_.File(name));
  }
  // A file of its own is no input.
  EXPECT_TRUE(WriteTableAt(dir_.File("other.engram")).ok());
}

TEST_F(InputFiles, AHoldRecordsItsFileUntilItIsDestroyed) {
  const std::string path = dir_.File("held");
  testing::WriteFile(path, "x");
  {
    InputFileHold hold = HoldInputPath(path, "a thing under test");
    ExpectRefused(CheckNotAnInput(path, "output"), "(a thing under test, which this process reads)");
    InputFileHold moved = std::move(hold);
    ExpectRefused(CheckNotAnInput(path, "output"), "a thing under test");
  }
  EXPECT_TRUE(CheckNotAnInput(path, "output").ok());
}

TEST_F(InputFiles, AFileReadWholeStaysAnInputUntilItsPathNamesAnotherFile) {
  // A token map, read and closed: its contents are in use for the rest of
  // the process, so its file stays an input ...
  const std::string map = dir_.File("token-map.u32");
  testing::WriteFile(map, std::string("\x01\x00\x00\x00", 4));
  fs::create_hard_link(map, dir_.File("map-link"));
  ASSERT_TRUE(TokenMap::FromFile(map).ok());
  ExpectRefused(CheckOutputPath(dir_.File("map-link"), "hot_set_path"), "(a token map, which this process reads)");
  // ... until its path names another file: the recorded inode may then be
  // reused by any file, which must not be refused.
  testing::WriteFile(dir_.File("new-map"), std::string("\x02\x00\x00\x00", 4));
  fs::rename(dir_.File("new-map"), map);
  EXPECT_TRUE(CheckOutputPath(dir_.File("map-link"), "hot_set_path").ok());
  fs::remove(map);
  EXPECT_TRUE(CheckOutputPath(dir_.File("map-link"), "hot_set_path").ok());
}

TEST_F(InputFiles, ANewFileAtTheReadFilesPathIsNotTakenForIt) {
  // A file read, removed, and another made at its path: file systems hand a
  // freed inode number straight to the next file, so without the record
  // keeping its file open the new one would look like the one read.
  const std::string map = dir_.File("map.u32");
  for (int round = 0; round < 20; ++round) {
    testing::WriteFile(map, std::string("\x01\x00\x00\x00", 4));
    ASSERT_TRUE(TokenMap::FromFile(map).ok());
    ExpectRefused(CheckOutputPath(map, "output"), "(a token map, which this process reads)");
    fs::remove(map);
    testing::WriteFile(map, "a file written later");
    ASSERT_TRUE(CheckOutputPath(map, "output").ok()) << "round " << round;
    fs::remove(map);
  }
}

TEST_F(InputFiles, AnOutputThatIsNotARegularFileIsRefusedNamingWhatItIs) {
  ASSERT_EQ(::mkfifo(dir_.File("fifo").c_str(), 0600), 0);
  fs::create_directory(dir_.File("dir"));
  fs::create_symlink("/dev/null", dir_.File("null"));
  ExpectRefused(CheckOutputPath(dir_.File("fifo"), "hot_set_path"), "is a FIFO, not a regular file");
  ExpectRefused(CheckOutputPath(dir_.File("dir"), "output"), "is a directory");
  ExpectRefused(CheckOutputPath(dir_.File("null"), "output"), "is a character device");
  ExpectRefused(fileutil::WriteFileAtomically(dir_.File("fifo"), "x", "hot_set_path"), "is a FIFO");
  ExpectRefused(WriteTableAt(dir_.File("null")), "is a character device");
  EXPECT_TRUE(fs::is_fifo(dir_.File("fifo")));
  EXPECT_TRUE(fs::is_symlink(dir_.File("null")));
  EXPECT_TRUE(CheckOutputPath(dir_.File("missing"), "output").ok());
}

// ---- temporary files -------------------------------------------------------

// A file named `name` in `dir`, optionally held by an flock as a live writer
// holds its temporary file (the returned descriptor; -1 when not held).
int MakeFile(const TempDir& dir, const std::string& name, bool locked) {
  testing::WriteFile(dir.File(name), "partial");
  if (!locked) return -1;
  const int fd = ::open(dir.File(name).c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::flock(fd, LOCK_EX), 0);
  return fd;
}

TEST_F(InputFiles, TheNextWriterRemovesOnlyTheTemporaryFilesOfItsOutputThatNoLiveWriterHolds) {
  const std::string out = dir_.File("out.json");
  MakeFile(dir_, ".out.json.tmp-AbC123", false);           // left by a killed writer
  const int live = MakeFile(dir_, ".out.json.tmp-XyZ789", true);  // a writer still at work
  MakeFile(dir_, ".out.json.tmp-AbC12", false);            // not the pattern: five letters
  MakeFile(dir_, ".out.json.tmp-AbC12_", false);           // not the pattern: '_'
  MakeFile(dir_, ".other.json.tmp-AbC123", false);         // another output's
  MakeFile(dir_, "out.json.tmp-AbC123", false);            // not hidden: not ours
  ASSERT_EQ(::mkfifo(dir_.File(".out.json.tmp-Fifo00").c_str(), 0600), 0);
  testing::WriteFile(dir_.File("target"), "keep");
  fs::create_symlink(dir_.File("target"), dir_.File(".out.json.tmp-Link00"));

  ASSERT_TRUE(fileutil::WriteFileAtomically(out, "{}", "output", /*sync=*/false).ok());
  EXPECT_FALSE(fs::exists(dir_.File(".out.json.tmp-AbC123"))) << "the dead writer's file was not removed";
  for (const char* kept : {".out.json.tmp-XyZ789", ".out.json.tmp-AbC12", ".out.json.tmp-AbC12_",
                           ".other.json.tmp-AbC123", "out.json.tmp-AbC123", ".out.json.tmp-Fifo00", "target"}) {
    EXPECT_TRUE(fs::exists(fs::symlink_status(dir_.File(kept)))) << kept << " was removed";
  }
  EXPECT_TRUE(fs::is_symlink(dir_.File(".out.json.tmp-Link00")));
  EXPECT_EQ(ReadBytes(dir_.File("target")), "keep");
  // Once its writer is gone, the next writer removes it too: TableWriter's
  // sweep is the same.
  ::close(live);
  const std::string table = dir_.File("table.engram");
  MakeFile(dir_, ".table.engram.tmp-Dead00", false);
  ASSERT_TRUE(fileutil::WriteFileAtomically(out, "{}", "output", /*sync=*/false).ok());
  EXPECT_FALSE(fs::exists(dir_.File(".out.json.tmp-XyZ789")));
  ASSERT_TRUE(WriteTableAt(table).ok());
  EXPECT_FALSE(fs::exists(dir_.File(".table.engram.tmp-Dead00")));
}

TEST_F(InputFiles, AWritersTemporaryFileIsLockedUntilItIsInPlace) {
  const std::string out = dir_.File("locked.engram");
  TableWriterOptions o;
  o.record_bytes = kRecord;
  o.sync = false;
  auto w = TableWriter::Create(out, o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const std::string temp = (*w)->temp_path();
  ASSERT_TRUE(fs::exists(temp));
  const int probe = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(probe, 0);
  EXPECT_NE(::flock(probe, LOCK_EX | LOCK_NB), 0) << "a live writer's temporary file is not locked";
  ::close(probe);
  // Another writer of the same output leaves it alone.
  EXPECT_EQ(fileutil::RemoveStaleTempFiles(out), 0u);
  EXPECT_TRUE(fs::exists(temp));
  ASSERT_TRUE((*w)->AppendRecords(testing::ExpectedRow(1, 0, kRecord)).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_TRUE(TableFile::Open(out).ok());
}

}  // namespace
}  // namespace engram
