// Rank tables: a V4.1-shaped layer (the real layout's orders, heads and
// multipliers, primes scaled to ~3,000 rows) converted into R rank tables and
// a manifest, from safetensors (two shards, split inside a slot), from .npy,
// from an existing table (version 1 and a reference table), and in place.
// Every rank is opened through the Store by manifest and rank, and every one
// of its rows is gathered and compared with the unsharded table's row at the
// matching full row ID. Then every bad input: arguments, manifests and rank
// tables that do not fit together, corrupt manifests and rank_shard members.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engram/store.h"
#include "src/ngram/scaled_layout.h"
#include "storage/embedded_hash_layout.h"
#include "storage/layout_json.h"
#include "storage/rank_converter.h"
#include "storage/rank_manifest.h"
#include "storage/rank_shard.h"
#include "storage/reference_writer.h"
#include "storage/table_file.h"
#include "storage/table_writer.h"
#include "tests/testing/npy_file.h"
#include "tests/testing/safetensors_file.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

constexpr uint32_t kRecord = 264;
const std::string kLayoutFile = std::string(ENGRAM_FIXTURE_DIR) + "/engram-hash/layout-v41.json";
const uint32_t kRankCounts[] = {1, 2, 3, 4, 5, 6, 24};

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// One layer's sources, converted unsharded once, shared by every test.
class RankTables : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    auto full = EngramHashLayout::FromFile(kLayoutFile, 0);
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    auto scaled = ScaleLayout(*full, 3000);
    ASSERT_TRUE(scaled.ok()) << scaled.status().ToString();
    layout_ = new EngramHashLayout(*scaled);
    const uint64_t rows = layout_->total_rows;
    // Two shards, the second starting inside a slot's rows, so a slot's
    // range spans both (several reference entries, two reads).
    const uint64_t split = layout_->offsets[1][3] + 5;
    testing::WriteFile(File("a.safetensors"), testing::EngramShard(0, split));
    testing::WriteFile(File("b.safetensors"), testing::EngramShard(split, rows - split));
    testing::WriteFile(File("w.npy"), testing::Npy(testing::Dict("|u1", "(" + std::to_string(rows) + ", 256)"),
                                                   testing::Rows(1, 0, rows, 256)));
    testing::WriteFile(File("s.npy"), testing::Npy(testing::Dict("|u1", "(" + std::to_string(rows) + ", 8)"),
                                                   testing::Rows(2, 0, rows, 8)));
    auto spec = SafetensorsSpec();
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto header = ConvertToTable(*spec, File("full.engram"), Options());
    ASSERT_TRUE(header.ok()) << header.status().ToString();
    auto ref = WriteReferenceTable(*spec, File("full-ref.engram"), Options());
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    auto table = TableFile::Open(File("full.engram"));
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    full_rows_ = new std::vector<std::byte>(rows * kRecord);
    for (uint64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE((*table)->ReadRow(r, std::span(full_rows_->data() + r * kRecord, kRecord)).ok());
    }
  }
  static void TearDownTestSuite() {
    delete full_rows_;
    delete layout_;
    delete dir_;
  }

  static std::string File(const std::string& name) { return dir_->File(name); }
  static Result<ConvertSpec> SafetensorsSpec() {
    return SafetensorsConvertSpec({File("a.safetensors"), File("b.safetensors")}, "engram.weight", "engram.scale");
  }
  static ConvertOptions Options() {
    ConvertOptions o;
    o.hash_layout = LayoutToJson(*layout_);
    o.writer.sync = false;
    o.writer.buffer_bytes = 64 << 10;
    o.chunk_bytes = 64 * kRecord;  // several chunks a slot: the streaming loop is exercised
    return o;
  }
  static RankConvertOptions RankOptions(uint32_t ranks, bool in_place = false) {
    RankConvertOptions o;
    o.ranks = ranks;
    o.in_place = in_place;
    o.convert = Options();
    return o;
  }

  static StoreOptions OpenRank(const std::string& manifest, int32_t rank) {
    StoreOptions o;
    TableOptions t;
    t.manifest = manifest;
    o.tables.push_back(t);
    o.rank = rank;
    o.cache_bytes = 1 << 20;
    o.io_backend = "pread";
    o.io_threads = 1;
    o.completion_threads = 1;
    o.commit_cache_memory = false;
    o.read_buffer_bytes = 0;
    return o;
  }

  // Every rank of `manifest`: opened by the Store, every local row j equal
  // to the unsharded row at the full row ID of its slot.
  static void ExpectEveryRankIsItsSlotsRows(const std::string& manifest, uint32_t ranks) {
    auto m = ReadRankManifest(manifest);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_EQ(m->ranks, ranks);
    uint64_t rows_over_ranks = 0;
    for (uint32_t r = 0; r < ranks; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r) + " of " + std::to_string(ranks));
      auto store = Store::Open(OpenRank(manifest, static_cast<int32_t>(r)));
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      EXPECT_EQ((*store)->Stats(0).name, m->name);
      // Written out here, not with the library's helpers: the rule of the
      // design (slot s = order index * heads + head; rank r holds s % R == r,
      // ascending; its rows are the slots' full ranges in that order).
      std::vector<uint32_t> slots;
      std::vector<uint64_t> full_ids;
      for (uint32_t s = 0; s < 24; ++s) {
        if (s % ranks != r) continue;
        slots.push_back(s);
        const uint32_t o = s / layout_->heads, h = s % layout_->heads;
        for (uint64_t k = 0; k < layout_->primes[o][h]; ++k) full_ids.push_back(layout_->offsets[o][h] + k);
      }
      EXPECT_EQ(m->rank_files[r].slots, slots);
      ASSERT_EQ((*store)->row_count(0), full_ids.size());
      std::vector<uint64_t> local(full_ids.size());
      std::iota(local.begin(), local.end(), 0);
      std::vector<std::byte> got(local.size() * kRecord);
      GatherResult g = (*store)->Gather(0, local, got.data(), kRecord);
      ASSERT_TRUE(g.status.ok()) << g.status.ToString();
      for (uint64_t j = 0; j < local.size(); ++j) {
        ASSERT_EQ(std::memcmp(got.data() + j * kRecord, full_rows_->data() + full_ids[j] * kRecord, kRecord), 0)
            << "local row " << j << " is not full row " << full_ids[j];
      }
      rows_over_ranks += local.size();
    }
    EXPECT_EQ(rows_over_ranks, layout_->total_rows);
  }

  static TempDir* dir_;
  static EngramHashLayout* layout_;
  static std::vector<std::byte>* full_rows_;
};

TempDir* RankTables::dir_ = nullptr;
EngramHashLayout* RankTables::layout_ = nullptr;
std::vector<std::byte>* RankTables::full_rows_ = nullptr;

TEST_F(RankTables, FromSafetensorsEveryRankHoldsTheUnshardedRowsOfItsSlots) {
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  for (uint32_t ranks : kRankCounts) {
    const std::string out = File("st-" + std::to_string(ranks) + ".json");
    auto m = ConvertSpecToRanks(*spec, out, RankOptions(ranks));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ExpectEveryRankIsItsSlotsRows(out, ranks);
  }
}

TEST_F(RankTables, FromNpyEveryRankHoldsTheUnshardedRowsOfItsSlots) {
  auto spec = NpyConvertSpec({File("w.npy")}, {File("s.npy")});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  for (uint32_t ranks : kRankCounts) {
    const std::string out = File("npy-" + std::to_string(ranks) + ".json");
    auto m = ConvertSpecToRanks(*spec, out, RankOptions(ranks));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ExpectEveryRankIsItsSlotsRows(out, ranks);
  }
}

TEST_F(RankTables, FromAnEngramTableEveryRankHoldsTheUnshardedRowsOfItsSlots) {
  for (uint32_t ranks : kRankCounts) {
    const std::string out = File("table-" + std::to_string(ranks) + ".json");
    // No layout given: the table's own hash_layout is used.
    RankConvertOptions o = RankOptions(ranks);
    o.convert.hash_layout.reset();
    auto m = ConvertTableToRanks(File("full.engram"), out, o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ExpectEveryRankIsItsSlotsRows(out, ranks);
  }
}

TEST_F(RankTables, FromAReferenceTableEveryRankHoldsTheUnshardedRowsOfItsSlots) {
  for (uint32_t ranks : {2u, 5u}) {
    const std::string out = File("ref-table-" + std::to_string(ranks) + ".json");
    auto m = ConvertTableToRanks(File("full-ref.engram"), out, RankOptions(ranks));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ExpectEveryRankIsItsSlotsRows(out, ranks);
  }
}

TEST_F(RankTables, InPlaceEveryRankReferencesTheUnshardedRowsOfItsSlots) {
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  for (uint32_t ranks : kRankCounts) {
    const std::string out = File("inplace-" + std::to_string(ranks) + ".json");
    auto m = ConvertSpecToRanks(*spec, out, RankOptions(ranks, true));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    for (const RankFile& f : m->rank_files) {
      auto t = TableFile::Open(f.path);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      ASSERT_TRUE((*t)->is_reference());
      // A reference table's size is its checksums and metadata, not its rows.
      EXPECT_LT((*t)->file_bytes(), f.rows * kRecord / 4 + 64 * 1024);
      EXPECT_TRUE((*t)->VerifyAll().ok());
    }
    ExpectEveryRankIsItsSlotsRows(out, ranks);
  }
}

TEST_F(RankTables, RankTablesAreNamedBesideTheManifestAndCarryTheirShard) {
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  const std::string out = File("named.json");
  auto m = ConvertSpecToRanks(*spec, out, RankOptions(5));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->name, "named");
  const uint32_t sizes[] = {5, 5, 5, 5, 4};
  for (uint32_t r = 0; r < 5; ++r) {
    EXPECT_EQ(m->rank_files[r].file, "named.rank" + std::to_string(r) + "-of-5.engram");
    EXPECT_EQ(m->rank_files[r].slots.size(), sizes[r]);
    auto t = TableFile::Open(File(m->rank_files[r].file));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_NE((*t)->rank_shard(), nullptr);
    EXPECT_EQ((*t)->rank_shard()->rank, r);
    EXPECT_EQ((*t)->rank_shard()->manifest_id, m->manifest_id);
    EXPECT_EQ((*t)->rank_shard()->source_rows, layout_->total_rows);
    EXPECT_EQ((*t)->fingerprint(), m->rank_files[r].fingerprint);
  }
  // The all-gather maps as written.
  json doc = json::parse(ReadText(out));
  for (uint32_t s = 0; s < 24; ++s) {
    EXPECT_EQ(doc["slot_to_rank"][s], s % 5);
    EXPECT_EQ(doc["slot_index_in_rank"][s], s / 5);
  }
  EXPECT_EQ(doc["hash_layout"], LayoutToJson(*layout_));
  for (const auto& e : fs::directory_iterator(dir_->path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST_F(RankTables, AManifestAndItsRankTablesMovedTogetherStillOpen) {
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  fs::create_directory(File("before"));
  auto m = ConvertSpecToRanks(*spec, File("before/moved.json"), RankOptions(3));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  fs::rename(File("before"), File("after"));
  ExpectEveryRankIsItsSlotsRows(File("after/moved.json"), 3);
}

void ExpectStatus(const Status& s, StatusCode code, const std::string& needle) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << "'" << needle << "' not in: " << s.ToString();
}

// --- Converting over an existing manifest ------------------------------------

// The rank table files in the test directory whose names start with `stem.`.
std::vector<std::string> FilesOf(const std::string& dir, const std::string& stem) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(stem + ".") || name.starts_with("." + stem + ".")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(RankTables, AConversionOverAManifestWritesANewGenerationAndRemovesTheOldOnceItsManifestIsInPlace) {
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  const std::string out = File("gen.json");
  ASSERT_TRUE(ConvertSpecToRanks(*spec, out, RankOptions(3)).ok());
  EXPECT_EQ(FilesOf(dir_->path(), "gen"), (std::vector<std::string>{"gen.json", "gen.rank0-of-3.engram",
                                                                    "gen.rank1-of-3.engram", "gen.rank2-of-3.engram"}));
  // Again: the other generation's names; the old set's tables go once the
  // new manifest names the new ones.
  auto again = ConvertSpecToRanks(*spec, out, RankOptions(3));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->rank_files[1].file, "gen.g1.rank1-of-3.engram");
  EXPECT_EQ(FilesOf(dir_->path(), "gen"),
            (std::vector<std::string>{"gen.g1.rank0-of-3.engram", "gen.g1.rank1-of-3.engram",
                                      "gen.g1.rank2-of-3.engram", "gen.json"}));
  ExpectEveryRankIsItsSlotsRows(out, 3);
  // And back, with another rank count.
  ASSERT_TRUE(ConvertTableToRanks(File("full.engram"), out, RankOptions(2)).ok());
  EXPECT_EQ(FilesOf(dir_->path(), "gen"),
            (std::vector<std::string>{"gen.json", "gen.rank0-of-2.engram", "gen.rank1-of-2.engram"}));
  ExpectEveryRankIsItsSlotsRows(out, 2);
}

TEST_F(RankTables, AConversionThatFailsAfterItsFirstRankLeavesTheOldSetOpeningAndNothingOfItsOwn) {
  const std::string out = File("kept.json");
  ASSERT_TRUE(ConvertTableToRanks(File("full.engram"), out, RankOptions(2)).ok());
  const std::string manifest = ReadText(out);
  const std::vector<std::string> before = FilesOf(dir_->path(), "kept");
  // A source whose slot 1 (rank 1's) has a corrupt block: rank 0 is written
  // whole, then rank 1 fails.
  const std::string bad = File("bad-source.engram");
  fs::copy_file(File("full.engram"), bad);
  {
    auto t = TableFile::Open(bad);
    ASSERT_TRUE(t.ok());
    const uint64_t row = layout_->offsets[0][1] + layout_->primes[0][1] / 2;
    const uint64_t at = (*t)->BlockOffset((*t)->BlockOfRow(row)) + (*t)->RowOffsetInBlock(row);
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    const char c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(at));
    f.put(static_cast<char>(c ^ 0x5a));
  }
  auto failed = ConvertTableToRanks(bad, out, RankOptions(2));
  ASSERT_EQ(failed.status().code(), StatusCode::kCorruption) << failed.status().ToString();
  // The old manifest and the set it names, as they were: every rank opens.
  EXPECT_EQ(ReadText(out), manifest);
  EXPECT_EQ(FilesOf(dir_->path(), "kept"), before) << "the failed conversion left or removed files";
  ExpectEveryRankIsItsSlotsRows(out, 2);
  // A first conversion that fails leaves nothing at all.
  ASSERT_FALSE(ConvertTableToRanks(bad, File("fresh.json"), RankOptions(2)).ok());
  EXPECT_TRUE(FilesOf(dir_->path(), "fresh").empty());
}

TEST_F(RankTables, NoOutputOfAConversionIsTheLayoutFileItRead) {
  const std::string path = File("layout-out.json");
  testing::WriteFile(path, json{{"layers", json::array({LayoutToJson(*layout_)})}}.dump());
  const std::string before = ReadText(path);
  RankConvertOptions o = RankOptions(2);
  auto layout = LoadLayerHashLayout(path, layout_->layer_id);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  o.convert.hash_layout = *layout;
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  auto m = ConvertSpecToRanks(*spec, path, o);
  ExpectStatus(m.status(), StatusCode::kInvalidArgument, "is the same file as " + path + " (a hash layout file");
  ExpectStatus(ConvertToTable(*spec, path, o.convert).status(), StatusCode::kInvalidArgument,
               "is the same file as " + path);
  EXPECT_EQ(ReadText(path), before);
  EXPECT_EQ(FilesOf(dir_->path(), "layout-out"), std::vector<std::string>{"layout-out.json"});
}

TEST_F(RankTables, AManifestAStoreOfThisProcessReadsIsNotConvertedOver) {
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  const std::string out = File("in-use.json");
  ASSERT_TRUE(ConvertSpecToRanks(*spec, out, RankOptions(2)).ok());
  {
    auto store = Store::Open(OpenRank(out, 0));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ExpectStatus(ConvertSpecToRanks(*spec, out, RankOptions(2)).status(), StatusCode::kInvalidArgument,
                 "the rank manifest of table 'in-use'");
  }
  EXPECT_TRUE(ConvertSpecToRanks(*spec, out, RankOptions(2)).ok());
}

// --- Bad arguments to the converter ----------------------------------------

TEST_F(RankTables, RankCountsOutsideOneTo24AreRefusedBeforeAnythingIsWritten) {
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  for (uint32_t ranks : {0u, 25u, 1000u}) {
    auto m = ConvertSpecToRanks(*spec, File("bad-ranks.json"), RankOptions(ranks));
    ASSERT_EQ(m.status().code(), StatusCode::kInvalidArgument) << ranks;
    EXPECT_NE(m.status().message().find("outside 1..24"), std::string::npos) << m.status().ToString();
  }
  EXPECT_FALSE(fs::exists(File("bad-ranks.json")));
  EXPECT_FALSE(fs::exists(File("bad-ranks.rank0-of-25.engram")));
}

TEST_F(RankTables, NoLayoutIsRefusedNamingTheOptions) {
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  RankConvertOptions o = RankOptions(2);
  o.convert.hash_layout.reset();
  auto m = ConvertSpecToRanks(*spec, File("no-layout.json"), o);
  ASSERT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("--layout"), std::string::npos) << m.status().ToString();
  // A table without an embedded layout, none given: the same.
  ASSERT_TRUE(testing::WriteGeneratedTable(File("plain.engram"), 100, kRecord, 1).ok());
  m = ConvertTableToRanks(File("plain.engram"), File("no-layout.json"), o);
  ASSERT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("hash layout"), std::string::npos) << m.status().ToString();
}

TEST_F(RankTables, AnOutputThatCannotBeWrittenIsRefusedBeforeAnythingIsWritten) {
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  auto m = ConvertSpecToRanks(*spec, File("missing-dir/out.json"), RankOptions(2));
  ASSERT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("cannot write"), std::string::npos) << m.status().ToString();
  fs::create_directory(File("a-dir.json"));
  m = ConvertSpecToRanks(*spec, File("a-dir.json"), RankOptions(2));
  ASSERT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("is a directory"), std::string::npos) << m.status().ToString();
  EXPECT_FALSE(fs::exists(File("a-dir.rank0-of-2.engram")));
}

TEST_F(RankTables, ARankTableIsNotConvertedAgainAndNpyIsNotConvertedInPlace) {
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  auto m = ConvertSpecToRanks(*spec, File("twice.json"), RankOptions(2));
  ASSERT_TRUE(m.ok());
  auto again = ConvertTableToRanks(m->rank_files[0].path, File("twice-again.json"), RankOptions(2));
  ASSERT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.status().message().find("already a rank table"), std::string::npos);
  auto npy = NpyConvertSpec({File("w.npy")}, {File("s.npy")});
  ASSERT_TRUE(npy.ok());
  auto in_place = ConvertSpecToRanks(*npy, File("npy-in-place.json"), RankOptions(2, true));
  ASSERT_EQ(in_place.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(in_place.status().message().find("safetensors"), std::string::npos);
}

// --- Opening a rank: manifests and rank tables that do not fit ---------------

class RankOpen : public RankTables {
 protected:
  void SetUp() override {
    auto spec = SafetensorsSpec();
    ASSERT_TRUE(spec.ok());
    if (!fs::exists(File("open.json"))) {
      ASSERT_TRUE(ConvertSpecToRanks(*spec, File("open.json"), RankOptions(3)).ok());
      ASSERT_TRUE(ConvertSpecToRanks(*spec, File("other.json"), RankOptions(3)).ok());
    }
    manifest_ = json::parse(ReadText(File("open.json")));
  }
  // Writes `doc` as a manifest beside the rank tables; returns its path.
  std::string WriteManifest(const json& doc, const std::string& name = "edited.json") {
    testing::WriteFile(File(name), doc.dump());
    return File(name);
  }
  Status OpenStatus(const std::string& manifest, int32_t rank) {
    return Store::Open(OpenRank(manifest, rank)).status();
  }
  json manifest_;
};

TEST_F(RankOpen, ARankAtOrAboveTheManifestsRanksIsInvalidArgument) {
  ExpectStatus(OpenStatus(File("open.json"), 3), StatusCode::kInvalidArgument, "has ranks 0..2");
}

TEST_F(RankOpen, AManifestWithoutARankAndARankWithoutAManifestAreInvalidArgument) {
  ExpectStatus(OpenStatus(File("open.json"), -1), StatusCode::kInvalidArgument, "no rank");
  StoreOptions o = OpenRank(File("open.json"), 0);
  o.tables[0] = TableOptions();
  o.tables[0].path = File("full.engram");
  ExpectStatus(Store::Open(o).status(), StatusCode::kInvalidArgument, "no table is given by rank manifest");
  o.tables[0].manifest = File("open.json");
  ExpectStatus(Store::Open(o).status(), StatusCode::kInvalidArgument, "a path or a manifest, not both");
}

TEST_F(RankOpen, ATableGivenAsAManifestIsSaidToBeATable) {
  const Status s = OpenStatus(File("full.engram"), 0);
  ExpectStatus(s, StatusCode::kInvalidArgument, "is an Engram table file, not a rank manifest");
  EXPECT_EQ(s.message().find("nests deeper"), std::string::npos) << s.ToString();
}

TEST_F(RankOpen, AManifestNamingAMissingRankFileIsNotFoundNamingIt) {
  json doc = manifest_;
  doc["rank_files"][1]["file"] = "gone.rank1-of-3.engram";
  const Status s = OpenStatus(WriteManifest(doc), 1);
  ExpectStatus(s, StatusCode::kNotFound, "gone.rank1-of-3.engram");
  EXPECT_NE(s.message().find("edited.json"), std::string::npos) << s.ToString();
}

TEST_F(RankOpen, ARankFileOfAnotherManifestIsRefusedNamingBothIds) {
  // The other conversion's rank 1 file, with its own (right) fingerprint:
  // only its manifest_id says it belongs elsewhere.
  json other = json::parse(ReadText(File("other.json")));
  json doc = manifest_;
  doc["rank_files"][1] = other["rank_files"][1];
  const Status s = OpenStatus(WriteManifest(doc), 1);
  ExpectStatus(s, StatusCode::kInvalidArgument, "belongs to manifest " + other["manifest_id"].get<std::string>());
  EXPECT_NE(s.message().find(manifest_["manifest_id"].get<std::string>()), std::string::npos) << s.ToString();
}

TEST_F(RankOpen, ARankFileWhoseFingerprintDiffersFromTheManifestsIsRefused) {
  json doc = manifest_;
  doc["rank_files"][2]["fingerprint"] = "0x0123456789abcdef";
  ExpectStatus(OpenStatus(WriteManifest(doc), 2), StatusCode::kInvalidArgument, "the manifest recorded 0x0123456789abcdef");
  // A rank file rewritten after its manifest: another salt, another fingerprint.
  auto spec = SafetensorsSpec();
  ASSERT_TRUE(spec.ok());
  auto m = ConvertSpecToRanks(*spec, File("rewritten.json"), RankOptions(3));
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(ConvertSpecToRanks(*spec, File("rewritten-again.json"), RankOptions(3)).ok());
  fs::copy_file(File("rewritten-again.rank0-of-3.engram"), m->rank_files[0].path, fs::copy_options::overwrite_existing);
  ExpectStatus(OpenStatus(File("rewritten.json"), 0), StatusCode::kInvalidArgument, "fingerprint");
}

TEST_F(RankOpen, ACorruptOrTruncatedManifestIsCorruptionNamingTheField) {
  const std::string text = ReadText(File("open.json"));
  testing::WriteFile(File("truncated.json"), text.substr(0, text.size() / 2));
  ExpectStatus(OpenStatus(File("truncated.json"), 0), StatusCode::kCorruption, "truncated.json");
  testing::WriteFile(File("empty.json"), "");
  EXPECT_EQ(OpenStatus(File("empty.json"), 0).code(), StatusCode::kCorruption);
  testing::WriteFile(File("deep.json"), std::string(100000, '['));
  ExpectStatus(OpenStatus(File("deep.json"), 0), StatusCode::kCorruption, "nests deeper");

  struct Edit {
    const char* what;
    std::function<void(json&)> edit;
    const char* needle;
  };
  const Edit edits[] = {
      {"format", [](json& d) { d["format"] = "engram-rank-manifest/2"; }, "\"format\""},
      {"ranks", [](json& d) { d["ranks"] = 25; }, "ranks 25"},
      {"ranks vs files", [](json& d) { d["ranks"] = 2; }, "strided maps"},
      {"slot_to_rank", [](json& d) { d["slot_to_rank"][4] = 2; }, "strided maps"},
      {"slot_count", [](json& d) { d["slot_count"] = 23; }, "slot_count 23"},
      {"manifest_id", [](json& d) { d["manifest_id"] = "0x12"; }, "\"manifest_id\""},
      {"missing rank file", [](json& d) { d["rank_files"].erase(2); }, "\"rank_files\" array of 3"},
      {"rank order", [](json& d) { std::swap(d["rank_files"][0], d["rank_files"][1]); }, "is for rank 1"},
      {"slots", [](json& d) { d["rank_files"][0]["slots"][0] = 1; }, "strided slots"},
      {"rows", [](json& d) { d["rank_files"][0]["rows"] = 7; }, "has 7 rows"},
      {"source_rows", [](json& d) { d["source_rows"] = 5; }, "total_rows"},
      {"file", [](json& d) { d["rank_files"][0]["file"] = ""; }, "has no \"file\""},
      {"record_bytes", [](json& d) { d["record_bytes"] = 0; }, "record_bytes 0"},
      {"name", [](json& d) { d.erase("name"); }, "no \"name\""},
  };
  for (const Edit& e : edits) {
    json doc = manifest_;
    e.edit(doc);
    const Status s = OpenStatus(WriteManifest(doc), 0);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << e.what << ": " << s.ToString();
    EXPECT_NE(s.message().find(e.needle), std::string::npos) << e.what << ": " << s.ToString();
  }
  // A record size the rank tables do not have: said as such, not as a rank
  // that differs ("is rank 0 of 3, the manifest wants rank 0 of 3").
  json doc = manifest_;
  doc["record_bytes"] = 128;
  const Status record = OpenStatus(WriteManifest(doc), 0);
  ExpectStatus(record, StatusCode::kInvalidArgument, "its rows are 264 bytes, the manifest's record_bytes is 128");
  EXPECT_EQ(record.message().find("wants rank"), std::string::npos) << record.ToString();
}

// --- rank_shard validation at open --------------------------------------------

// A table of `rows` records whose metadata holds `shard` (and the layout).
Status OpenWithShard(const std::string& path, const json& layout, const json& shard, uint64_t rows) {
  TableWriterOptions o;
  o.record_bytes = kRecord;
  o.sync = false;
  o.buffer_bytes = 64 << 10;
  o.metadata = json::object();
  if (!layout.is_null()) o.metadata["hash_layout"] = layout;
  o.metadata["rank_shard"] = shard;
  auto w = TableWriter::Create(path, o);
  if (!w.ok()) return w.status();
  std::vector<std::byte> zeros(rows * kRecord);
  ENGRAM_RETURN_IF_ERROR((*w)->AppendRecords(zeros));
  ENGRAM_RETURN_IF_ERROR((*w)->Finish());
  return TableFile::Open(path).status();
}

TEST_F(RankTables, ARankShardThatDoesNotFitTheLayoutOrTheRowsIsCorruption) {
  const json layout = LayoutToJson(*layout_);
  const std::vector<uint32_t> slots = StridedSlots(24, 5, 1);
  uint64_t rows = 0;
  for (const SlotRows& r : SlotRowRanges(*layout_, slots)) rows += r.rows;
  const json good = RankShardJson({5, 1, slots, 0x1234, layout_->total_rows});
  ASSERT_TRUE(OpenWithShard(File("shard-good.engram"), layout, good, rows).ok());

  struct Case {
    const char* what;
    json shard;
    uint64_t rows;
    const char* needle;
    bool with_layout = true;
  };
  auto with = [&](const char* key, json value) {
    json s = good;
    s[key] = std::move(value);
    return s;
  };
  const Case cases[] = {
      {"rows are not the slots' primes", good, rows - 1, "sum to"},
      {"slots not strided", with("slots", {1, 6, 11, 16}), rows, "strided slots"},
      {"slots not ascending", with("slots", {6, 1, 11, 16, 21}), rows, "strided slots"},
      {"slot past the layout", with("slots", {1, 6, 11, 16, 24}), rows, "not a slot of the layout"},
      {"zero ranks", with("ranks", 0), rows, "ranks 0 is outside"},
      {"25 ranks", with("ranks", 25), rows, "ranks 25 is outside"},
      {"rank not below ranks", with("rank", 5), rows, "rank 5 is not below ranks 5"},
      {"source rows not the layout's", with("source_rows", rows), rows, "source_rows"},
      {"assignment", with("assignment", "contiguous"), rows, "\"assignment\""},
      {"manifest_id", with("manifest_id", 7), rows, "\"manifest_id\""},
      {"not an object", json::array(), rows, "not an object"},
      {"no layout", good, rows, "hash_layout", false},
  };
  for (const Case& c : cases) {
    const Status s = OpenWithShard(File("shard-bad.engram"), c.with_layout ? layout : json(), c.shard, c.rows);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << c.what << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << c.what << ": " << s.ToString();
  }
}

}  // namespace
}  // namespace engram
