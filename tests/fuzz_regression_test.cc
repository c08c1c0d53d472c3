// Replays every fuzz seed (tests/fuzz/corpus/<target>/) and every crash
// reproducer the fuzzers found (tests/fuzz/regressions/<target>/) through the
// libFuzzer harnesses of tests/fuzz/, compiled here with the ordinary
// compiler, so the plain, ASan+UBSan and TSan suites all keep them fixed.
// (The fuzzing itself needs clang: scripts/fuzz.sh.)
#define ENGRAM_FUZZ_NO_MAIN 1
#include "tests/fuzz/hash_layout_fuzzer.cc"
#include "tests/fuzz/http_request_fuzzer.cc"
#include "tests/fuzz/node_message_fuzzer.cc"
#include "tests/fuzz/npy_header_fuzzer.cc"
#include "tests/fuzz/rank_manifest_fuzzer.cc"
#include "tests/fuzz/reference_table_fuzzer.cc"
#include "tests/fuzz/safetensors_header_fuzzer.cc"
#include "tests/fuzz/table_file_fuzzer.cc"
#include "tests/fuzz/trace_files_fuzzer.cc"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace engram::fuzz {
namespace {

namespace fs = std::filesystem;

struct Target {
  const char* name;
  int (*fn)(const uint8_t*, size_t);
};

const Target kTargets[] = {
    {"table_file_fuzzer", FuzzTableFile},           {"safetensors_header_fuzzer", FuzzSafetensorsHeader},
    {"npy_header_fuzzer", FuzzNpyHeader},           {"hash_layout_fuzzer", FuzzHashLayout},
    {"trace_files_fuzzer", FuzzTraceFiles},         {"http_request_fuzzer", FuzzHttpRequest},
    {"reference_table_fuzzer", FuzzReferenceTable}, {"rank_manifest_fuzzer", FuzzRankManifest},
    {"node_message_fuzzer", FuzzNodeMessage},
};

std::vector<fs::path> Inputs(const std::string& kind, const std::string& target) {
  std::vector<fs::path> files;
  const fs::path dir = fs::path(ENGRAM_FIXTURE_DIR) / ".." / "fuzz" / kind / target;
  if (!fs::is_directory(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  return files;
}

void Replay(const std::string& kind, bool must_exist) {
  for (const Target& t : kTargets) {
    std::vector<fs::path> files = Inputs(kind, t.name);
    if (must_exist) {
      EXPECT_FALSE(files.empty()) << "no " << kind << " for " << t.name;
    }
    for (const fs::path& p : files) {
      SCOPED_TRACE(p.string());
      std::ifstream in(p, std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_EQ(t.fn(bytes.data(), bytes.size()), 0);  // a crash or FUZZ_CHECK aborts the test
    }
  }
}

TEST(FuzzRegression, SeedCorporaPass) { Replay("corpus", /*must_exist=*/true); }
TEST(FuzzRegression, CrashReproducersStayFixed) { Replay("regressions", /*must_exist=*/false); }

TEST(FuzzRegression, EmptyAndTinyInputs) {
  const uint8_t bytes[] = {0xff, 0x00, 0x07, 0x01};
  for (const Target& t : kTargets) {
    for (size_t n = 0; n <= sizeof bytes; ++n) EXPECT_EQ(t.fn(bytes, n), 0) << t.name;
  }
}

// Bugs the fuzzers found, pinned directly as well.
TEST(FuzzRegression, EqualChunksWithAHugeCountDoNotOverflow) {
  // (length + K - 1) / K wrapped to 0 for K near 2^64: an endless loop.
  replay::SplitSpec split{replay::SplitSpec::Kind::kEqualChunks, ~uint64_t{0}};
  EXPECT_EQ(split.Boundaries(5), (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(split.Boundaries(0), (std::vector<size_t>{0}));
  replay::SplitSpec chunks{replay::SplitSpec::Kind::kChunkTokens, ~uint64_t{0}};
  EXPECT_EQ(chunks.Boundaries(3), (std::vector<size_t>{0, 3}));
}

TEST(FuzzRegression, EmptyTokenFileIsAnEmptyRequest) {
  // memcpy(nullptr, nullptr, 0) on an empty file (UBSan).
  MemFile file("empty-tokens");
  auto tokens = replay::ReadTokenFile(file.path());
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_TRUE(tokens->empty());
}

}  // namespace
}  // namespace engram::fuzz
