// StepStager against separate hash + gather calls on real tables (two
// V4.1-shaped layers scaled down, with their layouts embedded).
#include "engram/step_stager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <optional>
#include <thread>

#include "src/ngram/scaled_layout.h"
#include "src/store/store_impl.h"
#include "storage/mutex.h"
#include "storage/rank_shard.h"
#include "storage/table_writer.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

const std::string kHashDir = std::string(ENGRAM_FIXTURE_DIR) + "/engram-hash";
constexpr uint32_t kRecordBytes = 264;

class StepStagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> paths;
    for (uint32_t layer : {0u, 1u}) {
      auto full = EngramHashLayout::FromFile(kHashDir + "/layout-v41.json", layer);
      ASSERT_TRUE(full.ok()) << full.status().ToString();
      auto scaled = ScaleLayout(*full, 20000 + layer * 3000);
      ASSERT_TRUE(scaled.ok()) << scaled.status().ToString();
      layouts_.push_back(*scaled);
      GenerateTableOptions g;
      g.rows = scaled->total_rows;
      g.record_bytes = kRecordBytes;
      g.seed = 100 + layer;
      g.sync = false;
      g.metadata["hash_layout"] = nlohmann::json::parse(scaled->ToJson());
      const std::string path = dir_.File("layer" + std::to_string(layer) + ".engram");
      ASSERT_TRUE(GenerateTable(path, g).ok());
      paths.push_back(path);
    }
    store_ = OpenTables(paths, 4u << 20);
    ASSERT_NE(store_, nullptr);
    auto map = TokenMap::FromFile(kHashDir + "/token-map.u32");
    ASSERT_TRUE(map.ok());
    map_ = std::make_shared<const TokenMap>(std::move(map).value());
    std::mt19937 rng(7);
    for (int i = 0; i < 700; ++i) tokens_.push_back(3 + rng() % 400);  // small vocabulary: repeated n-grams
  }

  // out[token][layer][slot] by separate hash + gather per layer.
  std::vector<std::byte> Reference(const StepStager& stager, std::span<const uint32_t> history,
                                   std::span<const uint32_t> tokens) {
    const size_t slots = stager.rows_per_token(), layers = stager.layers();
    std::vector<std::byte> out(stager.OutputBytes(tokens.size()));
    for (size_t l = 0; l < layers; ++l) {
      std::vector<uint64_t> ids(tokens.size() * slots);
      EXPECT_TRUE(stager.hasher(l).Hash(history, tokens, ids).ok());
      std::vector<std::byte> rows(ids.size() * kRecordBytes);
      GatherResult g = store_->Gather(stager.tables()[l], ids, rows.data(), kRecordBytes);
      EXPECT_TRUE(g.status.ok()) << g.status.ToString();
      for (size_t t = 0; t < tokens.size(); ++t) {
        std::memcpy(out.data() + ((t * layers + l) * slots) * kRecordBytes, rows.data() + t * slots * kRecordBytes,
                    slots * kRecordBytes);
      }
    }
    return out;
  }

  // Rank `rank` of `ranks` of a fixture layer, as engram-convert --ranks
  // writes it: the strided slots' row ranges of the full table, packed in
  // slot order, with the full layout and a rank_shard.
  std::string WriteRankTable(uint32_t layer, uint32_t ranks, uint32_t rank) {
    const EngramHashLayout& layout = layouts_[layer];
    auto slots = StridedRankSlots(layout.rows_per_token(), ranks, rank);
    EXPECT_TRUE(slots.ok());
    TableWriterOptions o;
    o.record_bytes = kRecordBytes;
    o.sync = false;
    o.metadata["hash_layout"] = nlohmann::json::parse(layout.ToJson());
    o.metadata["rank_shard"] = RankShardJson({ranks, rank, *slots, 0x44, layout.total_rows});
    const std::string path =
        dir_.File("layer" + std::to_string(layer) + ".rank" + std::to_string(rank) + "-of-" + std::to_string(ranks) +
                  ".engram");
    auto writer = TableWriter::Create(path, o);
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    for (const SlotRows& range : SlotRowRanges(layout, *slots)) {
      for (uint64_t row = range.first_row; row < range.first_row + range.rows; ++row) {
        EXPECT_TRUE((*writer)->AppendRecords(testing::ExpectedRow(100 + layer, row, kRecordBytes)).ok());
      }
    }
    EXPECT_TRUE((*writer)->Finish().ok());
    return path;
  }

  std::unique_ptr<Store> OpenTables(const std::vector<std::string>& paths, uint64_t cache_bytes = 2u << 20) {
    StoreOptions options;
    for (const std::string& path : paths) {
      TableOptions table;
      table.path = path;
      options.tables.push_back(table);
    }
    options.cache_bytes = cache_bytes;
    options.io_backend = "pread";
    auto store = Store::Open(options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  testing::TempDir dir_;
  std::vector<EngramHashLayout> layouts_;
  std::unique_ptr<Store> store_;
  std::shared_ptr<const TokenMap> map_;
  std::vector<uint32_t> tokens_;
};

TEST_F(StepStagerTest, StageEqualsSeparateHashAndGatherPerLayer) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok()) << stager.status().ToString();
  EXPECT_EQ((*stager)->rows_per_token(), 24u);
  EXPECT_EQ((*stager)->history_tokens(), 3u);
  std::span<const uint32_t> all(tokens_);
  std::span<const uint32_t> history = all.first(300), step = all.subspan(300, 400);
  std::vector<std::byte> out((*stager)->OutputBytes(step.size()), std::byte{0xee});
  StageResult r = (*stager)->Stage(history, step, out.data());
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.rows, 400u * 2 * 24);
  EXPECT_LT(r.distinct_rows, r.rows);  // repeated n-grams were looked up once
  EXPECT_EQ(r.hits + r.misses, r.distinct_rows);
  EXPECT_TRUE(out == Reference(**stager, history, step));
}

TEST_F(StepStagerTest, OneLayerStageEqualsHashAndGather) {
  auto stager = StepStager::Create(*store_, {1}, nullptr);
  ASSERT_TRUE(stager.ok()) << stager.status().ToString();
  std::vector<std::byte> out((*stager)->OutputBytes(tokens_.size()));
  StageResult r = (*stager)->Stage({}, tokens_, out.data());
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(out == Reference(**stager, {}, tokens_));
}

TEST_F(StepStagerTest, StartStageCallsBackOnceWithTheRows) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  std::vector<std::byte> out((*stager)->OutputBytes(tokens_.size()));
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  StageResult got;
  (*stager)->StartStage({}, tokens_, out.data(), [&](StageResult r) {
    std::lock_guard<std::mutex> lock(mu);
    got = std::move(r);
    ++calls;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return calls > 0; });
  lock.unlock();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(got.status.ok()) << got.status.ToString();
  EXPECT_TRUE(out == Reference(**stager, {}, tokens_));
}

// An engine that holds back every read of one file until Release(), so a
// test can keep one layer's gathers pending while another layer's complete.
class HoldingEngine final : public io::IoEngine {
 public:
  HoldingEngine(std::unique_ptr<io::IoEngine> inner, std::string held_path)
      : inner_(std::move(inner)), held_path_(std::move(held_path)) {}
  ~HoldingEngine() override { Shutdown(); }

  io::IoBackend backend() const override { return inner_->backend(); }
  std::string Describe() const override { return "holding(" + inner_->Describe() + ")"; }
  Result<io::FileId> OpenFile(const std::string& path) override {
    auto id = inner_->OpenFile(path);
    if (id.ok() && path == held_path_) {
      MutexLock lock(&mu_);
      held_file_ = *id;
    }
    return id;
  }
  Status CloseFile(io::FileId file) override { return inner_->CloseFile(file); }
  Result<uint64_t> FileSize(io::FileId file) const override { return inner_->FileSize(file); }
  Status RegisterBuffer(std::span<std::byte> region) override { return inner_->RegisterBuffer(region); }
  io::IoStatsSnapshot Stats() const override { return inner_->Stats(); }
  void SubmitBatch(std::span<io::BlockRead> reads, io::IoCallback done) override {
    {
      MutexLock lock(&mu_);
      if (!released_ && !reads.empty() && reads[0].file == held_file_) {
        held_.emplace_back(reads, std::move(done));
        return;
      }
    }
    inner_->SubmitBatch(reads, std::move(done));
  }
  // Submits the held reads; later ones pass straight through.
  void Release() {
    std::vector<std::pair<std::span<io::BlockRead>, io::IoCallback>> held;
    {
      MutexLock lock(&mu_);
      released_ = true;
      held.swap(held_);
    }
    for (auto& [reads, done] : held) inner_->SubmitBatch(reads, std::move(done));
  }
  void Shutdown() override {
    Release();
    inner_->Shutdown();
  }

 private:
  std::unique_ptr<io::IoEngine> inner_;
  const std::string held_path_;
  Mutex mu_;
  io::FileId held_file_ GUARDED_BY(mu_) = ~io::FileId{0};
  bool released_ GUARDED_BY(mu_) = false;
  std::vector<std::pair<std::span<io::BlockRead>, io::IoCallback>> held_ GUARDED_BY(mu_);
};

// The fixture's two tables in a store whose reads of layer 1's file wait
// for engine->Release().
std::unique_ptr<StoreImpl> OpenHoldingLayer1(const testing::TempDir& dir, HoldingEngine** engine) {
  StoreOptions options;
  for (const char* name : {"layer0.engram", "layer1.engram"}) {
    TableOptions table;
    table.path = dir.File(name);
    options.tables.push_back(table);
  }
  options.io_backend = "pread";
  auto store = StoreImpl::Open(options, [&](const io::IoOptions& io) -> Result<std::unique_ptr<io::IoEngine>> {
    ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<io::IoEngine> inner, io::CreateIoEngine(io));
    auto holding = std::make_unique<HoldingEngine>(std::move(inner), dir.File("layer1.engram"));
    *engine = holding.get();
    return std::unique_ptr<io::IoEngine>(std::move(holding));
  });
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

// out's bytes of one layer: [token][layer][slot][record].
std::vector<std::byte> LayerBytes(const std::vector<std::byte>& out, const StepStager& stager, size_t layer) {
  const size_t per_layer = stager.rows_per_token() * size_t(stager.record_bytes());
  std::vector<std::byte> bytes;
  for (size_t at = layer * per_layer; at < out.size(); at += stager.layers() * per_layer) {
    bytes.insert(bytes.end(), out.begin() + at, out.begin() + at + per_layer);
  }
  return bytes;
}

TEST_F(StepStagerTest, WaitLayerReturnsThatLayersExactRowsWhileALaterLayerIsStillReading) {
  HoldingEngine* engine = nullptr;
  std::unique_ptr<StoreImpl> held = OpenHoldingLayer1(dir_, &engine);
  ASSERT_NE(held, nullptr);
  auto stager = StepStager::Create(*held, {0, 1}, map_);
  ASSERT_TRUE(stager.ok()) << stager.status().ToString();
  std::span<const uint32_t> all(tokens_);
  std::span<const uint32_t> history = all.first(300), step = all.subspan(300, 400);
  const std::vector<std::byte> expected = Reference(**stager, history, step);
  std::vector<std::byte> out((*stager)->OutputBytes(step.size()), std::byte{0xee});

  StageTicket ticket = (*stager)->Start(history, step, out.data());
  ASSERT_EQ(ticket.layers(), 2u);
  StageLayerResult first = ticket.WaitLayer(0);
  ASSERT_TRUE(first.status.ok()) << first.status.ToString();
  EXPECT_TRUE(LayerBytes(out, **stager, 0) == LayerBytes(expected, **stager, 0));
  EXPECT_EQ(first.rows, 400u * 24);
  EXPECT_GT(first.misses, 0u);  // a cold store: layer 0 really was read
  EXPECT_EQ(first.hits + first.misses, first.distinct_rows);
  EXPECT_TRUE(ticket.Ready(0).value());
  // Layer 1's reads are held by the engine (or not yet started): it cannot be ready.
  EXPECT_FALSE(ticket.Ready(1).value());

  engine->Release();
  StageLayerResult second = ticket.WaitLayer(1);
  ASSERT_TRUE(second.status.ok()) << second.status.ToString();
  EXPECT_GE(second.wait_nanoseconds, first.wait_nanoseconds);
  StageResult step_result = ticket.Wait();
  ASSERT_TRUE(step_result.status.ok()) << step_result.status.ToString();
  EXPECT_TRUE(out == expected);
  ASSERT_EQ(step_result.layers.size(), 2u);
  EXPECT_EQ(step_result.misses, first.misses + second.misses);
  EXPECT_EQ(step_result.hits, first.hits + second.hits);
  EXPECT_EQ(step_result.rows, first.rows + second.rows);
  EXPECT_EQ(step_result.wait_nanoseconds, second.wait_nanoseconds);
  EXPECT_FALSE(ticket.valid());
}

TEST_F(StepStagerTest, StageTicketRefusesALayerOutOfRangeAndAWaitedTicket) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  std::vector<std::byte> out((*stager)->OutputBytes(tokens_.size()));
  StageTicket ticket = (*stager)->Start({}, tokens_, out.data());
  auto ready = ticket.Ready(2);
  EXPECT_EQ(ready.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ready.status().message().find("layer 2 out of range"), std::string::npos) << ready.status().ToString();
  EXPECT_EQ(ticket.WaitLayer(2).status.code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(ticket.Wait().status.ok());
  EXPECT_TRUE(out == Reference(**stager, {}, tokens_));
  // After Wait(), the ticket is spent: every question is a clear error.
  EXPECT_EQ(ticket.Wait().status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ticket.WaitLayer(0).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ticket.Ready(0).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(StepStagerTest, DroppingAnUnwaitedTicketWaitsForItsGathersSoOutMayBeFreed) {
  HoldingEngine* engine = nullptr;
  std::unique_ptr<StoreImpl> held = OpenHoldingLayer1(dir_, &engine);
  ASSERT_NE(held, nullptr);
  auto stager = StepStager::Create(*held, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  auto out = std::make_unique<std::vector<std::byte>>((*stager)->OutputBytes(tokens_.size()));
  std::optional<StageTicket> ticket = (*stager)->Start({}, tokens_, out->data());
  ASSERT_FALSE(ticket->Ready(1).value());
  // Destroying it on another thread blocks there until layer 1's reads are released.
  std::atomic<bool> dropped{false};
  std::thread dropper([&] {
    ticket.reset();
    dropped = true;
  });
  EXPECT_FALSE(dropped.load());  // layer 1 is held, so the drop cannot have finished
  engine->Release();
  dropper.join();
  EXPECT_TRUE(dropped.load());
  out.reset();  // freed only now: nothing writes into it any more (ASan would tell)
}

TEST_F(StepStagerTest, AFailedHashFailsEveryLayerOfTheTicket) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  std::vector<uint32_t> bad = {5, 6, 4000000000u};
  std::vector<std::byte> out((*stager)->OutputBytes(bad.size()));
  StageTicket ticket = (*stager)->Start({}, bad, out.data());
  EXPECT_TRUE(ticket.Ready(1).value());
  EXPECT_EQ(ticket.WaitLayer(0).status.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ticket.WaitLayer(1).status.code(), StatusCode::kOutOfRange);
  StageResult r = ticket.Wait();
  EXPECT_EQ(r.status.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(r.layers.size(), 2u);
}

TEST_F(StepStagerTest, StageReportsEachLayersCountsAndWait) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  std::vector<std::byte> out((*stager)->OutputBytes(tokens_.size()));
  StageResult r = (*stager)->Stage({}, tokens_, out.data());
  ASSERT_TRUE(r.status.ok());
  ASSERT_EQ(r.layers.size(), 2u);
  EXPECT_EQ(r.layers[0].misses + r.layers[1].misses, r.misses);
  EXPECT_EQ(r.layers[0].distinct_rows + r.layers[1].distinct_rows, r.distinct_rows);
  EXPECT_LE(r.layers[0].wait_nanoseconds, r.layers[1].wait_nanoseconds);  // waited in layer order
  EXPECT_LE(r.layers[1].wait_nanoseconds, r.wait_nanoseconds);
}

TEST_F(StepStagerTest, ConcurrentStagesFromManyThreadsAllMatch) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  const std::vector<std::byte> expected = Reference(**stager, {}, tokens_);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 5; ++k) {
        std::vector<std::byte> out((*stager)->OutputBytes(tokens_.size()));
        StageResult r = (*stager)->Stage({}, tokens_, out.data());
        if (!r.status.ok() || out != expected) ++mismatches;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(StepStagerTest, TokenOutsideTheMapFailsBeforeWritingAnything) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  std::vector<uint32_t> bad = {5, 6, 4000000000u};
  std::vector<std::byte> out((*stager)->OutputBytes(bad.size()), std::byte{0x5a});
  StageResult r = (*stager)->Stage({}, bad, out.data());
  EXPECT_EQ(r.status.code(), StatusCode::kOutOfRange) << r.status.ToString();
  for (std::byte b : out) ASSERT_EQ(b, std::byte{0x5a});
}

TEST_F(StepStagerTest, CreateRefusesTablesWithoutHashLayoutOrBadIndex) {
  const std::string plain = dir_.File("plain.engram");
  ASSERT_TRUE(testing::WriteGeneratedTable(plain, 100, kRecordBytes, 1).ok());
  StoreOptions options;
  TableOptions table;
  table.path = plain;
  options.tables.push_back(table);
  options.io_backend = "pread";
  auto store = Store::Open(options);
  ASSERT_TRUE(store.ok());
  auto no_layout = StepStager::Create(**store, {0}, nullptr);
  EXPECT_EQ(no_layout.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_layout.status().message().find("hash_layout"), std::string::npos);
  auto bad_index = StepStager::Create(*store_, {0, 7}, nullptr);
  EXPECT_EQ(bad_index.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(StepStagerTest, EachRanksStageIsTheUnshardedStageAtItsSlots) {
  auto full = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(full.ok());
  std::span<const uint32_t> history(tokens_.data(), 200), step(tokens_.data() + 200, 500);
  std::vector<std::byte> whole((*full)->OutputBytes(step.size()));
  ASSERT_TRUE((*full)->Stage(history, step, whole.data()).status.ok());
  const size_t n = step.size(), record = kRecordBytes;
  for (uint32_t ranks : {2u, 5u}) {
    for (uint32_t rank = 0; rank < ranks; ++rank) {
      auto store = OpenTables({WriteRankTable(0, ranks, rank), WriteRankTable(1, ranks, rank)});
      ASSERT_NE(store, nullptr);
      auto stager = StepStager::Create(*store, {0, 1}, map_);
      ASSERT_TRUE(stager.ok()) << stager.status().ToString();
      const std::vector<uint32_t> slots = *StridedRankSlots(24, ranks, rank);
      ASSERT_EQ((*stager)->rows_per_token(), slots.size());
      ASSERT_EQ((*stager)->hasher(1).slots(), slots);
      std::vector<std::byte> part((*stager)->OutputBytes(n));
      ASSERT_EQ(part.size(), n * 2 * slots.size() * record);
      StageResult r = (*stager)->Stage(history, step, part.data());
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      EXPECT_EQ(r.rows, n * 2 * slots.size());
      // The all-gather formula: full[t][l][s] = part[slot_to_rank[s]][t][l][slot_index_in_rank[s]].
      for (size_t t = 0; t < n; ++t) {
        for (size_t l = 0; l < 2; ++l) {
          for (size_t j = 0; j < slots.size(); ++j) {
            ASSERT_EQ(std::memcmp(part.data() + ((t * 2 + l) * slots.size() + j) * record,
                                  whole.data() + ((t * 2 + l) * 24 + slots[j]) * record, record),
                      0)
                << ranks << " ranks, rank " << rank << " token " << t << " layer " << l << " slot " << slots[j];
          }
        }
      }
    }
  }
}

TEST_F(StepStagerTest, LayersHoldingDifferentSlotsAreRefused) {
  auto store = OpenTables({WriteRankTable(0, 4, 1), WriteRankTable(1, 4, 2), dir_.File("layer1.engram")});
  ASSERT_NE(store, nullptr);
  auto other_rank = StepStager::Create(*store, {0, 1}, map_);
  ASSERT_EQ(other_rank.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other_rank.status().message().find("slots [2, 6, 10, 14, 18, 22]"), std::string::npos)
      << other_rank.status().ToString();
  EXPECT_NE(other_rank.status().message().find("slots [1, 5, 9, 13, 17, 21]"), std::string::npos)
      << other_rank.status().ToString();
  auto unsharded = StepStager::Create(*store, {0, 2}, map_);
  ASSERT_EQ(unsharded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unsharded.status().message().find("every slot"), std::string::npos) << unsharded.status().ToString();
  EXPECT_TRUE(StepStager::Create(*store, {1}, map_).ok());
}

// The IDs a GPU hash kernel writes for the step: [token][layer][slot].
std::vector<uint64_t> InterleavedIds(const StepStager& stager, std::span<const uint32_t> history,
                                     std::span<const uint32_t> tokens) {
  const size_t slots = stager.rows_per_token(), layers = stager.layers();
  std::vector<uint64_t> ids(tokens.size() * layers * slots), layer_ids(tokens.size() * slots);
  for (size_t l = 0; l < layers; ++l) {
    EXPECT_TRUE(stager.hasher(l).Hash(history, tokens, layer_ids).ok());
    for (size_t t = 0; t < tokens.size(); ++t) {
      std::copy_n(&layer_ids[t * slots], slots, &ids[(t * layers + l) * slots]);
    }
  }
  return ids;
}

TEST_F(StepStagerTest, EachLayerOfAStepIsOneGather) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  std::span<const uint32_t> all(tokens_);
  for (size_t n : {1, 8, 64}) {
    const uint64_t before0 = store_->Stats(0).gathers, before1 = store_->Stats(1).gathers;
    std::vector<std::byte> out((*stager)->OutputBytes(n));
    ASSERT_TRUE((*stager)->Stage(all.first(50), all.subspan(50, n), out.data()).status.ok());
    ASSERT_TRUE((*stager)->Start(all.first(50), all.subspan(50, n), out.data()).Wait().status.ok());
    const std::vector<uint64_t> ids = InterleavedIds(**stager, all.first(50), all.subspan(50, n));
    ASSERT_TRUE((*stager)->GatherStep(ids, out.data()).status.ok());
    ASSERT_TRUE((*stager)->StartGatherStep(ids, out.data()).Wait().status.ok());
    EXPECT_EQ(store_->Stats(0).gathers - before0, 4u) << n << " tokens";
    EXPECT_EQ(store_->Stats(1).gathers - before1, 4u) << n << " tokens";
  }
}

TEST_F(StepStagerTest, GatherStepOfAStepsIdsEqualsItsStage) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  std::span<const uint32_t> all(tokens_);
  std::span<const uint32_t> history = all.first(100), step = all.subspan(100, 300);
  const std::vector<std::byte> expected = Reference(**stager, history, step);
  const std::vector<uint64_t> ids = InterleavedIds(**stager, history, step);
  std::vector<std::byte> out((*stager)->OutputBytes(step.size()), std::byte{0xee});
  StageResult r = (*stager)->GatherStep(ids, out.data());
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.tokens, step.size());
  EXPECT_EQ(r.rows, ids.size());
  EXPECT_EQ(r.hits + r.misses, r.distinct_rows);
  EXPECT_TRUE(out == expected);
  // Started: per layer, and the IDs may go as soon as it returns.
  std::vector<std::byte> started((*stager)->OutputBytes(step.size()), std::byte{0xee});
  std::vector<uint64_t> copy = ids;
  StageTicket ticket = (*stager)->StartGatherStep(copy, started.data());
  std::fill(copy.begin(), copy.end(), 0);
  ASSERT_TRUE(ticket.WaitLayer(0).status.ok());
  EXPECT_TRUE(LayerBytes(started, **stager, 0) == LayerBytes(expected, **stager, 0));
  ASSERT_TRUE(ticket.Wait().status.ok());
  EXPECT_TRUE(started == expected);
}

TEST_F(StepStagerTest, GatherStepRefusesIdsOfTheWrongCountOrPastTheirTableBeforeGathering) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  std::span<const uint32_t> all(tokens_);
  std::vector<uint64_t> ids = InterleavedIds(**stager, {}, all.first(3));
  std::vector<std::byte> out((*stager)->OutputBytes(3), std::byte{0x5a});
  const uint64_t gathers = store_->Stats(0).gathers + store_->Stats(1).gathers;

  StageResult r = (*stager)->GatherStep(std::span<const uint64_t>(ids).first(ids.size() - 1), out.data());
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("not a whole number of tokens of 2 layers x 24 slots"), std::string::npos)
      << r.status.ToString();
  ids[(2 * 2 + 1) * 24 + 5] = store_->row_count(1);  // token 2, layer 1, slot 5: one past the end
  r = (*stager)->GatherStep(ids, out.data());
  EXPECT_EQ(r.status.code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status.message().find("at [token 2, layer 1, slot 5] is past the end of its table"), std::string::npos)
      << r.status.ToString();
  EXPECT_EQ((*stager)->StartGatherStep(ids, out.data()).Wait().status.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(std::count(out.begin(), out.end(), std::byte{0x5a}), ptrdiff_t(out.size())) << "nothing is written";
  EXPECT_EQ(store_->Stats(0).gathers + store_->Stats(1).gathers, gathers) << "nothing is gathered";
}

TEST_F(StepStagerTest, EachLayersWordIsStoredAfterItsRowsAndItsHook) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  std::span<const uint32_t> all(tokens_);
  std::span<const uint32_t> history = all.first(20), step = all.subspan(20, 40);
  const std::vector<std::byte> expected = Reference(**stager, history, step);
  for (int form = 0; form < 4; ++form) {
    SCOPED_TRACE(form);
    std::vector<std::byte> out((*stager)->OutputBytes(step.size()));
    std::vector<uint32_t> words = {0, 0};
    const uint32_t sequence = 7 + form;
    std::vector<std::string> seen;  // what each hook call saw
    StepCompletion c;
    c.words = words;
    c.sequence = sequence;
    c.layer_done = [&](size_t layer, const StageLayerResult& r) {
      // Its rows are in; its word is not yet stored.
      const bool rows = LayerBytes(out, **stager, layer) == LayerBytes(expected, **stager, layer);
      const uint32_t word = std::atomic_ref<uint32_t>(words[layer]).load(std::memory_order_acquire);
      seen.push_back(std::to_string(layer) + (r.status.ok() ? " ok" : " failed") + (rows ? " rows" : " no rows") +
                     " word " + std::to_string(word));
    };
    const std::vector<uint64_t> ids = InterleavedIds(**stager, history, step);
    StageResult r;
    if (form == 0) r = (*stager)->Stage(history, step, out.data(), c);
    if (form == 1) r = (*stager)->Start(history, step, out.data(), nullptr, c).Wait();
    if (form == 2) r = (*stager)->GatherStep(ids, out.data(), c);
    if (form == 3) r = (*stager)->StartGatherStep(ids, out.data(), nullptr, c).Wait();
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(seen, (std::vector<std::string>{"0 ok rows word 0", "1 ok rows word 0"}));
    EXPECT_EQ(words, (std::vector<uint32_t>{sequence, sequence}));
  }
}

TEST_F(StepStagerTest, CompletionWordsNotOnePerLayerOrWithoutASequenceAreRefusedUntouched) {
  auto stager = StepStager::Create(*store_, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  std::vector<std::byte> out((*stager)->OutputBytes(2), std::byte{0x5a});
  const std::vector<uint32_t> step = {5, 6};
  struct Case {
    size_t words;
    uint32_t sequence;
    const char* message;
  };
  for (const Case& k : {Case{3, 1, "3 words given, the step has 2 layers"},
                        Case{1, 1, "1 words given, the step has 2 layers"},
                        Case{0, 4, "0 words given, the step has 2 layers"},
                        Case{2, 0, "sequence number 0 is not in 1..2147483647"},
                        Case{2, kStepWordFailed, "sequence number 2147483648 is not in 1..2147483647"}}) {
    SCOPED_TRACE(k.message);
    std::vector<uint32_t> words(k.words, 99);
    StepCompletion c;
    c.words = words;
    c.sequence = k.sequence;
    int hooks = 0;
    c.layer_done = [&](size_t, const StageLayerResult&) { ++hooks; };
    EXPECT_EQ((*stager)->CheckCompletion(c).code(), StatusCode::kInvalidArgument);
    for (int form = 0; form < 3; ++form) {
      StageResult r = form == 0   ? (*stager)->Stage({}, step, out.data(), c)
                      : form == 1 ? (*stager)->Start({}, step, out.data(), nullptr, c).Wait()
                                  : (*stager)->GatherStep(InterleavedIds(**stager, {}, step), out.data(), c);
      EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(r.status.message().find(k.message), std::string::npos) << r.status.ToString();
    }
    EXPECT_EQ(words, std::vector<uint32_t>(k.words, 99)) << "words that cannot be told stay as they were";
    EXPECT_EQ(hooks, 0);
  }
  EXPECT_EQ(std::count(out.begin(), out.end(), std::byte{0x5a}), ptrdiff_t(out.size()));
}

// An engine whose reads of one file all fail with EIO, at once.
class FailingEngine final : public io::IoEngine {
 public:
  FailingEngine(std::unique_ptr<io::IoEngine> inner, std::string failed_path)
      : inner_(std::move(inner)), failed_path_(std::move(failed_path)) {}
  io::IoBackend backend() const override { return inner_->backend(); }
  std::string Describe() const override { return "failing(" + inner_->Describe() + ")"; }
  Result<io::FileId> OpenFile(const std::string& path) override {
    auto id = inner_->OpenFile(path);
    if (id.ok() && path == failed_path_) failed_file_ = *id;
    return id;
  }
  Status CloseFile(io::FileId file) override { return inner_->CloseFile(file); }
  Result<uint64_t> FileSize(io::FileId file) const override { return inner_->FileSize(file); }
  io::IoStatsSnapshot Stats() const override { return inner_->Stats(); }
  void SubmitBatch(std::span<io::BlockRead> reads, io::IoCallback done) override {
    if (reads.empty() || reads[0].file != failed_file_) return inner_->SubmitBatch(reads, std::move(done));
    for (io::BlockRead& r : reads) r.status = Status::IOError("injected: the device failed");
    done();
  }
  void Shutdown() override { inner_->Shutdown(); }

 private:
  std::unique_ptr<io::IoEngine> inner_;
  const std::string failed_path_;
  std::atomic<io::FileId> failed_file_{~io::FileId{0}};
};

TEST_F(StepStagerTest, AFailedLayersWordHoldsTheSequenceWithTheHighBit) {
  StoreOptions options;
  for (const char* name : {"layer0.engram", "layer1.engram"}) options.tables.push_back({dir_.File(name), "", 0});
  options.io_backend = "pread";
  auto store = StoreImpl::Open(options, [&](const io::IoOptions& io) -> Result<std::unique_ptr<io::IoEngine>> {
    ENGRAM_ASSIGN_OR_RETURN(std::unique_ptr<io::IoEngine> inner, io::CreateIoEngine(io));
    return std::unique_ptr<io::IoEngine>(std::make_unique<FailingEngine>(std::move(inner), dir_.File("layer1.engram")));
  });
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto stager = StepStager::Create(**store, {0, 1}, map_);
  ASSERT_TRUE(stager.ok());
  std::span<const uint32_t> all(tokens_);
  for (int form = 0; form < 3; ++form) {
    SCOPED_TRACE(form);
    std::span<const uint32_t> step = all.subspan(form * 10, 10);  // misses: each form's own tokens
    std::vector<std::byte> out((*stager)->OutputBytes(step.size()));
    std::vector<uint32_t> words = {0, 0};
    StepCompletion c;
    c.words = words;
    c.sequence = 41;
    StageResult r = form == 0   ? (*stager)->Stage({}, step, out.data(), c)
                    : form == 1 ? (*stager)->Start({}, step, out.data(), nullptr, c).Wait()
                                : (*stager)->GatherStep(InterleavedIds(**stager, {}, step), out.data(), c);
    EXPECT_EQ(r.status.code(), StatusCode::kIOError) << r.status.ToString();
    ASSERT_EQ(r.layers.size(), 2u);
    EXPECT_TRUE(r.layers[0].status.ok());
    EXPECT_EQ(r.layers[1].status.code(), StatusCode::kIOError);
    EXPECT_EQ(words[0], 41u);
    EXPECT_EQ(words[1], 41u | kStepWordFailed);
  }
  // A step that fails before its gathers (a token outside the map) tells every layer.
  std::vector<uint32_t> words = {0, 0};
  std::vector<std::byte> out((*stager)->OutputBytes(2));
  StepCompletion c;
  c.words = words;
  c.sequence = 5;
  const std::vector<uint32_t> bad = {5, 4000000000u};
  EXPECT_EQ((*stager)->Stage({}, bad, out.data(), c).status.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(words, (std::vector<uint32_t>{5 | kStepWordFailed, 5 | kStepWordFailed}));
  words = {0, 0};
  EXPECT_EQ((*stager)->Start({}, bad, out.data(), nullptr, c).Wait().status.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(words, (std::vector<uint32_t>{5 | kStepWordFailed, 5 | kStepWordFailed}));
}

TEST_F(StepStagerTest, ARanksGatherStepTakesItsOwnSlotsIds) {
  const uint32_t ranks = 3, rank = 1;
  auto store = OpenTables({WriteRankTable(0, ranks, rank), WriteRankTable(1, ranks, rank)});
  ASSERT_NE(store, nullptr);
  auto stager = StepStager::Create(*store, {0, 1}, map_);
  ASSERT_TRUE(stager.ok()) << stager.status().ToString();
  ASSERT_EQ((*stager)->rows_per_token(), 8u);
  std::span<const uint32_t> all(tokens_);
  std::span<const uint32_t> history = all.first(30), step = all.subspan(30, 50);
  std::vector<std::byte> staged((*stager)->OutputBytes(step.size()));
  ASSERT_TRUE((*stager)->Stage(history, step, staged.data()).status.ok());
  const std::vector<uint64_t> ids = InterleavedIds(**stager, history, step);  // the rank hasher's IDs
  ASSERT_EQ(ids.size(), step.size() * 2 * 8);
  std::vector<std::byte> out((*stager)->OutputBytes(step.size()));
  StageResult r = (*stager)->GatherStep(ids, out.data());
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(out == staged);
  // One token of one full layer (24 slots) is not a whole token of this rank's 2 x 8.
  const std::vector<uint64_t> full(24, 0);
  EXPECT_EQ((*stager)->GatherStep(full, out.data()).status.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace engram
