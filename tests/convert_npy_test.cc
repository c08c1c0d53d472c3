// .npy -> Engram table. Every .npy file is assembled here byte by byte
// (magic, version, header length, dict literal, data), as numpy lays it out.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "storage/npy_header.h"
#include "storage/table_converter.h"
#include "storage/table_file.h"
#include "tests/testing/npy_file.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using testing::Dict;
using testing::Npy;
using testing::TempDir;


void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

char Byte(int tag, uint64_t r, uint64_t c) { return static_cast<char>((tag * 57 + r * 13 + c * 3 + 5) & 0xff); }

std::string Rows(int tag, uint64_t first, uint64_t rows, uint64_t row_bytes) {
  std::string s;
  for (uint64_t r = first; r < first + rows; ++r)
    for (uint64_t c = 0; c < row_bytes; ++c) s += Byte(tag, r, c);
  return s;
}

ConvertOptions FastOptions() {
  ConvertOptions o;
  o.writer.sync = false;
  o.chunk_bytes = 700;
  return o;
}

void ExpectRecords(const std::string& path, uint64_t rows, uint64_t wrow, uint64_t srow) {
  auto t = TableFile::Open(path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ((*t)->row_count(), rows);
  ASSERT_EQ((*t)->record_bytes(), wrow + srow);
  std::vector<std::byte> got(wrow + srow);
  for (uint64_t r = 0; r < rows; ++r) {
    ASSERT_TRUE((*t)->ReadRow(r, got).ok());
    std::string want = Rows(1, r, 1, wrow) + (srow ? Rows(2, r, 1, srow) : "");
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size())) << "row " << r;
  }
}

TEST(ConvertNpy, U8WeightAndScaleFilesBecomeRecords) {
  TempDir dir;
  WriteFile(dir.File("w.npy"), Npy(Dict("|u1", "(41, 256)"), Rows(1, 0, 41, 256)));
  WriteFile(dir.File("s.npy"), Npy(Dict("|u1", "(41, 8)"), Rows(2, 0, 41, 8)));
  auto spec = NpyConvertSpec({dir.File("w.npy")}, {dir.File("s.npy")});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(ConvertToTable(*spec, dir.File("t.engram"), FastOptions()).ok());
  ExpectRecords(dir.File("t.engram"), 41, 256, 8);
}

TEST(ConvertNpy, AllHeaderVersionsAndShardsRoundTrip) {
  TempDir dir;
  // v1 f4, v2 f4, v3 f4 shards of one [*, 6] float32 table (24-byte rows).
  WriteFile(dir.File("a.npy"), Npy(Dict("<f4", "(5, 6)"), Rows(1, 0, 5, 24), 1));
  WriteFile(dir.File("b.npy"), Npy(Dict("<f4", "(1, 6)"), Rows(1, 5, 1, 24), 2));
  WriteFile(dir.File("c.npy"), Npy(Dict("<f4", "(30, 6)"), Rows(1, 6, 30, 24), 3));
  auto spec = NpyConvertSpec({dir.File("a.npy"), dir.File("b.npy"), dir.File("c.npy")}, {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(ConvertToTable(*spec, dir.File("t.engram"), FastOptions()).ok());
  ExpectRecords(dir.File("t.engram"), 36, 24, 0);
}

TEST(ConvertNpy, TensorWithoutRowsIsRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  WriteFile(dir.File("w.npy"), Npy(Dict("|u1", "(0, 264)"), ""));
  auto spec = NpyConvertSpec({dir.File("w.npy")}, {});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto header = ConvertToTable(*spec, dir.File("t.engram"), FastOptions());
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.status().code(), StatusCode::kInvalidArgument) << header.status().ToString();
  EXPECT_NE(header.status().message().find("a table needs at least one row"), std::string::npos)
      << header.status().ToString();
  // Only the input: no table, no temporary file.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1u);
}

TEST(ConvertNpy, ScaleFileCountMustMatch) {
  TempDir dir;
  WriteFile(dir.File("w.npy"), Npy(Dict("|u1", "(2, 4)"), Rows(1, 0, 2, 4)));
  EXPECT_EQ(NpyConvertSpec({dir.File("w.npy")}, {dir.File("w.npy"), dir.File("w.npy")}).status().code(),
            StatusCode::kInvalidArgument);
}

TensorInfo Parse(const std::string& file, Status* status) {
  std::span<const std::byte> b(reinterpret_cast<const std::byte*>(file.data()), file.size());
  auto t = ParseNpyHeader(b, file.size());
  *status = t.status();
  return t.ok() ? *t : TensorInfo{};
}

TEST(NpyHeader, ParsesNumpyStyleHeaders) {
  Status s;
  std::string f = Npy(Dict("<f2", "(3, 4)"), std::string(24, 'x'));
  TensorInfo t = Parse(f, &s);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(t.dtype, "F16");
  EXPECT_EQ(t.shape, (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(t.data_offset, f.size() - 24);
  EXPECT_EQ(t.data_offset % 64, 0u);
  EXPECT_EQ(t.row_bytes(), 8u);
  // Python 2 long suffixes, key order, double quotes, no trailing comma.
  t = Parse(Npy("{\"shape\": (3L,), \"fortran_order\": False, \"descr\": \"|V264\"}", std::string(3 * 264, 'x')),
            &s);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(t.dtype, "V264");
  EXPECT_EQ(t.row_bytes(), 264u);
  // 0-d array.
  t = Parse(Npy(Dict("<i8", "()"), std::string(8, 'x')), &s);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(t.shape.empty());
}

TEST(NpyHeader, UnsupportedLayoutsGetAClearError) {
  struct Case {
    const char* why;
    std::string file;
    StatusCode code;
    const char* expect;
  };
  std::vector<Case> cases = {
      {"fortran order", Npy(Dict("<f4", "(2, 2)", "True"), std::string(16, 'x')), StatusCode::kUnsupported,
       "fortran_order"},
      {"big endian", Npy(Dict(">f4", "(2, 2)"), std::string(16, 'x')), StatusCode::kUnsupported, "big-endian"},
      {"object dtype", Npy(Dict("|O8", "(2,)"), std::string(16, 'x')), StatusCode::kUnsupported, "'|O8'"},
      {"structured dtype", Npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "xxxx"),
       StatusCode::kUnsupported, "structured"},
      {"version 4", Npy(Dict("<f4", "(1,)"), "xxxx", 4), StatusCode::kUnsupported, "version 4"},
  };
  for (const Case& c : cases) {
    Status s;
    Parse(c.file, &s);
    ASSERT_FALSE(s.ok()) << c.why;
    EXPECT_EQ(s.code(), c.code) << c.why << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.why << ": " << s.ToString();
  }
}

TEST(NpyHeader, MalformedHeadersAreCorruption) {
  std::string good = Npy(Dict("<f4", "(2, 2)"), std::string(16, 'x'));
  std::string long_len = good;
  long_len[8] = '\xff';
  long_len[9] = '\xff';
  std::vector<std::pair<const char*, std::string>> cases = {
      {"bad magic", "\x93NUMPZ" + good.substr(6)},
      {"too short", good.substr(0, 7)},
      {"header past EOF", long_len},
      {"not a dict", Npy("[1, 2]", "")},
      {"unquoted key", Npy("{descr: '<f4'}", "")},
      {"missing shape", Npy("{'descr': '<f4', 'fortran_order': False}", "")},
      {"unknown key", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", "xxxx")},
      {"negative dim", Npy(Dict("<f4", "(-1,)"), "")},
      {"bad bool", Npy(Dict("<f4", "(1,)", "Maybe"), "xxxx")},
      {"bad descr", Npy(Dict("f4", "(1,)"), "xxxx")},
      {"garbage after dict", Npy(Dict("<f4", "(1,)") + " junk", "xxxx")},
      {"truncated data", Npy(Dict("<f4", "(2, 2)"), std::string(15, 'x'))},
      {"trailing data", Npy(Dict("<f4", "(2, 2)"), std::string(17, 'x'))},
      {"dim overflow", Npy(Dict("<f4", "(99999999999999999999,)"), "")},
      {"shape overflow", Npy(Dict("<f8", "(4294967296, 4294967296)"), "")},
      {"row overflow with zero rows", Npy(Dict("|u1", "(0, 257, 71777214294589696)"), "")},
      {"oversized shape", Npy(Dict("|u1", "(384006168, 264)"), std::string(64, 'x'))},
  };
  for (const auto& [why, file] : cases) {
    Status s;
    Parse(file, &s);
    ASSERT_FALSE(s.ok()) << why;
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << why << ": " << s.ToString();
    EXPECT_NE(s.message().find("npy header"), std::string::npos) << why << ": " << s.ToString();
  }
}

TEST(NpyHeader, EveryTruncationOfAValidFileIsRejected) {
  std::string f = Npy(Dict("<f4", "(3, 2)"), std::string(24, 'x'));
  for (size_t n = 0; n < f.size(); ++n) {
    Status s;
    Parse(f.substr(0, n), &s);
    EXPECT_FALSE(s.ok()) << n;
  }
}

TEST(NpyHeader, ReadFromDiskNamesTheFile) {
  TempDir dir;
  WriteFile(dir.File("f.npy"), Npy(Dict("<f4", "(2, 2)", "True"), std::string(16, 'x')));
  auto t = ReadNpyHeader(dir.File("f.npy"));
  EXPECT_EQ(t.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(t.status().message().find("f.npy"), std::string::npos);
}

}  // namespace
}  // namespace engram
