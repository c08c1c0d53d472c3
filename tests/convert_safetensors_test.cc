// safetensors -> Engram table. Every input file is assembled byte by byte
// (tests/testing/safetensors_file.h), independent of any writer in this
// repository.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "src/common/resident_memory.h"
#include "storage/safetensors_header.h"
#include "storage/table_converter.h"
#include "storage/table_file.h"
#include "tests/testing/safetensors_file.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using namespace engram::testing;

// A V4.1-style shard: weight[rows,256] F8_E4M3 then scale[rows,8] F8_E8M0,
// plus an unrelated tensor in between. Row numbers continue from first_row.
std::string V41Shard(uint64_t first_row, uint64_t rows) { return EngramShard(first_row, rows); }

ConvertOptions FastOptions() {
  ConvertOptions o;
  o.writer.sync = false;
  o.chunk_bytes = 1000;  // several chunks even for small inputs
  return o;
}

void ExpectRecords(const TableFile& t, uint64_t rows, uint64_t wrow, uint64_t srow) {
  ASSERT_EQ(t.row_count(), rows);
  ASSERT_EQ(t.record_bytes(), wrow + srow);
  std::vector<std::byte> got(t.record_bytes());
  for (uint64_t r = 0; r < rows; ++r) {
    ASSERT_TRUE(t.ReadRow(r, got).ok()) << r;
    std::string want = Rows(1, r, 1, wrow) + (srow ? Rows(2, r, 1, srow) : "");
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size())) << "row " << r;
  }
}

TEST(ConvertSafetensors, Fp8WeightAndScaleBecome264ByteRecords) {
  TempDir dir;
  WriteFile(dir.File("a.safetensors"), V41Shard(0, 37));
  auto spec = SafetensorsConvertSpec({dir.File("a.safetensors")}, "engram.weight", "engram.scale");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto h = ConvertToTable(*spec, dir.File("t.engram"), FastOptions());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  auto t = TableFile::Open(dir.File("t.engram"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ExpectRecords(**t, 37, 256, 8);
  const nlohmann::json m = (*t)->ParseMetadata().value();
  EXPECT_EQ(m["record"]["bytes"], 264);
  EXPECT_EQ(m["record"]["fields"][0]["dtype"], "F8_E4M3");
  EXPECT_EQ(m["record"]["fields"][1]["dtype"], "F8_E8M0");
  EXPECT_EQ(m["record"]["fields"][1]["offset"], 256);
  EXPECT_EQ(m["source"]["shards"][0]["weight_tensor"], "engram.weight");
  EXPECT_TRUE((*t)->VerifyAll().ok());
}

TEST(ConvertSafetensors, ShardsAreConcatenatedInOrder) {
  TempDir dir;
  WriteFile(dir.File("s0.safetensors"), V41Shard(0, 20));
  WriteFile(dir.File("s1.safetensors"), V41Shard(20, 1));
  WriteFile(dir.File("s2.safetensors"), V41Shard(21, 33));
  auto spec = SafetensorsConvertSpec({dir.File("s0.safetensors"), dir.File("s1.safetensors"),
                                      dir.File("s2.safetensors")},
                                     "engram.weight", "engram.scale");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(ConvertToTable(*spec, dir.File("t.engram"), FastOptions()).ok());
  auto t = TableFile::Open(dir.File("t.engram"));
  ASSERT_TRUE(t.ok());
  ExpectRecords(**t, 54, 256, 8);
  EXPECT_EQ((*t)->ParseMetadata().value()["source"]["shards"].size(), 3u);
}

TEST(ConvertSafetensors, Bf16WeightWithoutScaleIsCopiedAsStored) {
  TempDir dir;
  std::string w = Rows(1, 0, 9, 64);  // [9, 32] BF16 = 64 bytes per row
  WriteFile(dir.File("b.safetensors"), Safetensors("{" + TensorJson("e", "BF16", "[9,32]", 0, w.size()) + "}", w));
  auto spec = SafetensorsConvertSpec({dir.File("b.safetensors")}, "e", "");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(ConvertToTable(*spec, dir.File("t.engram"), FastOptions()).ok());
  auto t = TableFile::Open(dir.File("t.engram"));
  ASSERT_TRUE(t.ok());
  ExpectRecords(**t, 9, 64, 0);
}

TEST(ConvertSafetensors, ThreeDimensionalF32RowsAreFlattened) {
  TempDir dir;
  std::string w = Rows(1, 0, 4, 2 * 3 * 4);
  WriteFile(dir.File("c.safetensors"), Safetensors("{" + TensorJson("e", "F32", "[4,2,3]", 0, w.size()) + "}", w));
  auto spec = SafetensorsConvertSpec({dir.File("c.safetensors")}, "e", "");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(ConvertToTable(*spec, dir.File("t.engram"), FastOptions()).ok());
  auto t = TableFile::Open(dir.File("t.engram"));
  ASSERT_TRUE(t.ok());
  ExpectRecords(**t, 4, 24, 0);
}

TEST(ConvertSafetensors, HashLayoutIsEmbeddedOnlyWhenRowCountsAgree) {
  TempDir dir;
  WriteFile(dir.File("a.safetensors"), V41Shard(0, 18));
  auto spec = SafetensorsConvertSpec({dir.File("a.safetensors")}, "engram.weight", "engram.scale");
  ASSERT_TRUE(spec.ok());
  ConvertOptions o = FastOptions();
  o.hash_layout = nlohmann::json{{"layer_id", 1},          {"orders", {2}},
                                 {"heads", 2},             {"pad_id", 2},
                                 {"multipliers", {"3", "5"}}, {"primes", {{7, 11}}},
                                 {"offsets", {{0, 7}}},    {"total_rows", 18}};
  ASSERT_TRUE(ConvertToTable(*spec, dir.File("t.engram"), o).ok());
  auto t = TableFile::Open(dir.File("t.engram"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->ParseMetadata().value()["hash_layout"]["primes"][0][1], 11);
  (*o.hash_layout)["total_rows"] = 19;
  auto bad = ConvertToTable(*spec, dir.File("u.engram"), o);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("total_rows"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.File("u.engram")));
}

// Real shards hold attention and expert weights next to the table's tensors:
// a BF16 tensor and one of a dtype this build does not know are ignored.
TEST(ConvertSafetensors, OtherTensorsOfAnyDtypeAreIgnored) {
  TempDir dir;
  const std::string w = Rows(1, 0, 7, 256), sc = Rows(2, 0, 7, 8);
  const uint64_t ws = w.size(), ss = sc.size();
  auto shard = [&](uint64_t bf16_begin) {
    return Safetensors("{" + TensorJson("engram.weight", "F8_E4M3", "[7,256]", 0, ws) + "," +
                           TensorJson("attn.bf16", "BF16", "[2,2]", bf16_begin, bf16_begin + 8) + "," +
                           TensorJson("engram.scale", "F8_E8M0", "[7,8]", ws + 8, ws + 8 + ss) + "," +
                           TensorJson("expert.f4", "F4_E2M1", "[64]", ws + 8 + ss, ws + 8 + ss + 32) + "}",
                       w + std::string(8, 'b') + sc + std::string(32, 'f'));
  };
  WriteFile(dir.File("a.safetensors"), shard(ws));
  auto spec = SafetensorsConvertSpec({dir.File("a.safetensors")}, "engram.weight", "engram.scale");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_TRUE(ConvertToTable(*spec, dir.File("t.engram"), FastOptions()).ok());
  auto t = TableFile::Open(dir.File("t.engram"));
  ASSERT_TRUE(t.ok());
  ExpectRecords(**t, 7, 256, 8);
  // Named, the unknown dtype is refused with its name.
  auto named = SafetensorsConvertSpec({dir.File("a.safetensors")}, "expert.f4", "");
  EXPECT_EQ(named.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(named.status().message().find("'F4_E2M1'"), std::string::npos) << named.status().ToString();
  // An ignored tensor still may not overlap the table's data.
  WriteFile(dir.File("b.safetensors"), shard(10));
  auto bad = SafetensorsConvertSpec({dir.File("b.safetensors")}, "engram.weight", "engram.scale");
  EXPECT_NE(bad.status().message().find("overlap"), std::string::npos) << bad.status().ToString();
}

TEST(ConvertSafetensors, MissingTensorNamesTheFileAndWhatItHas) {
  TempDir dir;
  WriteFile(dir.File("a.safetensors"), V41Shard(0, 3));
  auto spec = SafetensorsConvertSpec({dir.File("a.safetensors")}, "nope", "");
  EXPECT_EQ(spec.status().code(), StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("a.safetensors"), std::string::npos);
  EXPECT_NE(spec.status().message().find("engram.weight"), std::string::npos);
}

TEST(ConvertSafetensors, MismatchedShardsOrScaleRowsAreRejected) {
  TempDir dir;
  WriteFile(dir.File("a.safetensors"), V41Shard(0, 3));
  std::string w = Rows(1, 0, 3, 128);
  WriteFile(dir.File("b.safetensors"),
            Safetensors("{" + TensorJson("engram.weight", "F8_E4M3", "[3,128]", 0, w.size()) + "," +
                            TensorJson("engram.scale", "F8_E8M0", "[2,8]", w.size(), w.size() + 16) + "}",
                        w + std::string(16, 'x')));
  auto two = SafetensorsConvertSpec({dir.File("a.safetensors"), dir.File("b.safetensors")}, "engram.weight", "");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(ConvertRecordBytes(*two).status().code(), StatusCode::kInvalidArgument);
  auto rows = SafetensorsConvertSpec({dir.File("b.safetensors")}, "engram.weight", "engram.scale");
  ASSERT_TRUE(rows.ok());
  auto r = ConvertRecordBytes(*rows);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("row counts"), std::string::npos);
}

TEST(ConvertSafetensors, RecordsLargerThanABlockAreRejected) {
  TempDir dir;
  std::string w(2 * 4096, 'a');
  WriteFile(dir.File("a.safetensors"), Safetensors("{" + TensorJson("e", "F32", "[2,1024]", 0, w.size()) + "}", w));
  auto spec = SafetensorsConvertSpec({dir.File("a.safetensors")}, "e", "");
  ASSERT_TRUE(spec.ok());
  auto h = ConvertToTable(*spec, dir.File("t.engram"), FastOptions());
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("4096"), std::string::npos) << h.status().ToString();
}


// Zero-row tensors carry no data, so their row sizes are bounded only by
// 64 bits: a weight row of 2^64 - 8 bytes plus a scale row of 272 bytes must
// not wrap round to a plausible 264-byte record (the converter then sized its
// buffers from the huge row and threw std::length_error).
TEST(ConvertSafetensors, RowSizesWhoseSumWrapsRoundAreRejected) {
  TempDir dir;
  WriteFile(dir.File("a.safetensors"),
            Safetensors("{" + TensorJson("w", "U8", "[0,18446744073709551608]", 0, 0) + "," +
                            TensorJson("s", "U8", "[0,272]", 0, 0) + "}",
                        ""));
  auto spec = SafetensorsConvertSpec({dir.File("a.safetensors")}, "w", "s");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(ConvertRecordBytes(*spec).status().code(), StatusCode::kInvalidArgument);
  Result<TableHeader> h = Status::OK();
  EXPECT_NO_THROW(h = ConvertToTable(*spec, dir.File("t.engram"), FastOptions()));
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument) << h.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(dir.File("t.engram")));
}
// ---- header parser: each malformed header gives a clear error, no crash ----

Status ParseBytes(const std::string& file) {
  std::span<const std::byte> b(reinterpret_cast<const std::byte*>(file.data()), file.size());
  return ParseSafetensorsHeader(b, file.size()).status();
}

TEST(SafetensorsHeader, ParsesShapesOffsetsAndMetadata) {
  std::string f = V41Shard(0, 5);
  std::span<const std::byte> b(reinterpret_cast<const std::byte*>(f.data()), f.size());
  auto h = ParseSafetensorsHeader(b, f.size());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->tensors.size(), 3u);
  const TensorInfo* s = h->Find("engram.scale");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->shape, (std::vector<uint64_t>{5, 8}));
  EXPECT_EQ(s->row_bytes(), 8u);
  EXPECT_EQ(s->data_offset, h->data_start + 5 * 256 + 4);
  EXPECT_EQ(h->metadata.at("format"), "pt");
}

TEST(SafetensorsHeader, MalformedHeadersAreRejectedWithTheReason) {
  struct Case {
    const char* why;
    std::string file;
    const char* expect;  // substring of the message
  };
  const std::string d16(16, 'd');
  std::vector<Case> cases = {
      {"empty file", "", "too short"},
      {"short length", std::string("\x05\0\0", 3), "too short"},
      {"length past EOF", Le64(1000) + "{}", "past the end"},
      {"length huge", Le64(~0ull) + "{}", "limit"},
      {"not JSON", Safetensors("{nope", ""), "JSON"},
      {"not an object", Safetensors("[1,2]", ""), "'{'"},
      {"tensor not object", Safetensors("{\"a\":3}", ""), "not a JSON object"},
      {"no dtype", Safetensors("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", "x"), "dtype"},
      {"unknown dtype", Safetensors("{" + TensorJson("a", "Q7", "[1]", 0, 1) + "}", "x"), "dtype 'Q7'"},
      {"negative shape", Safetensors("{" + TensorJson("a", "U8", "[-1]", 0, 1) + "}", "x"), "shape"},
      {"float shape", Safetensors("{" + TensorJson("a", "U8", "[1.5]", 0, 1) + "}", "x"), "shape"},
      {"shape vs bytes", Safetensors("{" + TensorJson("a", "F32", "[2,2]", 0, 15) + "}", d16), "needs 16 bytes"},
      {"begin > end", Safetensors("{" + TensorJson("a", "U8", "[0]", 5, 4) + "}", d16), "begin"},
      {"offsets past data", Safetensors("{" + TensorJson("a", "U8", "[32]", 0, 32) + "}", d16), "past the end"},
      {"shape overflow",
       Safetensors("{" + TensorJson("a", "F32", "[4294967296,4294967296,16]", 0, 0) + "}", ""), "overflows"},
      // 257 x 71777214294589696 wraps to 256 (mod 2^64); zero rows keep the total at 0.
      {"row overflow with zero rows",
       Safetensors("{" + TensorJson("a", "U8", "[0,257,71777214294589696]", 0, 0) + "}", ""), "overflows"},
      {"element overflow", Safetensors("{" + TensorJson("a", "F64", "[4611686018427387904]", 0, 0) + "}", ""),
       "overflows"},
      {"oversized shape", Safetensors("{" + TensorJson("a", "U8", "[384006168,264]", 0, 101377628352ull) + "}", d16),
       "past the end"},
      {"offsets not pair", Safetensors("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", "x"),
       "data_offsets"},
      {"overlap", Safetensors("{" + TensorJson("a", "U8", "[8]", 0, 8) + "," + TensorJson("b", "U8", "[8]", 4, 12) +
                                  "}",
                              d16),
       "overlap"},
      {"bad metadata", Safetensors("{\"__metadata__\":{\"k\":1}}", ""), "__metadata__"},
  };
  for (const Case& c : cases) {
    Status s = ParseBytes(c.file);
    ASSERT_FALSE(s.ok()) << c.why;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.why << ": " << s.ToString();
  }
}

TEST(SafetensorsHeader, EveryTruncationOfAValidFileIsRejected) {
  std::string f = V41Shard(0, 2);
  for (size_t n = 0; n < f.size(); ++n) {
    std::span<const std::byte> b(reinterpret_cast<const std::byte*>(f.data()), n);
    EXPECT_FALSE(ParseSafetensorsHeader(b, n).ok()) << n;
  }
}

TEST(SafetensorsHeader, ReadFromDiskNamesTheFile) {
  TempDir dir;
  WriteFile(dir.File("bad.safetensors"), Le64(100) + "{}");
  auto h = ReadSafetensorsHeader(dir.File("bad.safetensors"));
  EXPECT_EQ(h.status().code(), StatusCode::kCorruption);
  EXPECT_NE(h.status().message().find("bad.safetensors"), std::string::npos);
  EXPECT_EQ(ReadSafetensorsHeader(dir.File("missing.safetensors")).status().code(), StatusCode::kNotFound);
}

// A safetensors header of tens of MB (a checkpoint with many tensors) costs
// a small multiple of its size to find the named tensors in, not a parsed
// tree of every unrelated tensor.
TEST(SafetensorsHeader, LargeHeaderCostsASmallMultipleOfItsSize) {
  TempDir dir;
  const std::string path = dir.File("many.safetensors");
  const uint64_t kUnrelated = 300000;
  uint64_t header_bytes = 0;
  {
    std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
    header.reserve(32u << 20);
    for (uint64_t i = 0; i < kUnrelated; ++i) {
      header.append(",").append(
          TensorJson("model.layers." + std::to_string(i) + ".mlp.experts.weight", "U8", "[1]", i, i + 1));
    }
    header += "," + TensorJson("engram.weight", "U8", "[4,8]", kUnrelated, kUnrelated + 32) + "}";
    header_bytes = header.size();
    WriteFile(path, Safetensors(header, std::string(kUnrelated + 32, 'd')));
  }
  ASSERT_GT(header_bytes, uint64_t{20} << 20);
  const uint64_t before = testing::ResidentBytes();
  auto spec = SafetensorsConvertSpec({path}, "engram.weight", "");
  const uint64_t after = testing::ResidentBytes();
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->weight.size(), 1u);
  EXPECT_EQ(spec->weight[0].tensor.shape, (std::vector<uint64_t>{4, 8}));
  EXPECT_EQ(spec->weight[0].tensor.data_offset, 8 + header_bytes + kUnrelated);
  if (testing::kUnderSanitizer) GTEST_SKIP() << "RSS is not comparable under sanitizers (redzones, quarantine)";
  ASSERT_GT(before, 0u) << "/proc/self/statm unreadable";
  EXPECT_LE(after - std::min(after, before), 3 * header_bytes)
      << "reading a " << header_bytes << "-byte header grew RSS from " << before << " to " << after;
}

}  // namespace
}  // namespace engram
