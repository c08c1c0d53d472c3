// Completion words (StepCompletion): a thread that spins on a layer's word,
// as a GPU stream waiting with cuStreamWaitValue32 would, and reads the
// layer's rows the instant the word holds the step's sequence number, sees
// every row of the layer. Run under ThreadSanitizer, a word stored before
// the rows (or without release ordering) is a reported race; in every build,
// a word stored early is a row that does not match.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "engram/step_stager.h"
#include "engram/store.h"
#include "tests/io_test_util.h"
#include "tests/testing/step_tables.h"
#include "tests/testing/temp_table.h"

namespace engram {
namespace {

using testing::StepIds;
using testing::StepTokens;

class StepWordsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "io_uring" && !io::testing::IoUringAvailable()) GTEST_SKIP() << "no io_uring here";
    tables_ = testing::WriteStepTables(dir_);
    StoreOptions o;
    for (const std::string& path : tables_.paths) o.tables.push_back({path, "", 0});
    // About 7,000 rows of each layer's 22,000-25,000: steps both hit and miss.
    o.cache_bytes = 4u << 20;
    o.io_backend = GetParam();
    auto store = Store::Open(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    auto stager = StepStager::Create(*store_, {0, 1}, tables_.map);
    ASSERT_TRUE(stager.ok()) << stager.status().ToString();
    stager_ = std::move(stager).value();
  }

  testing::TempDir dir_;
  testing::StepTables tables_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<StepStager> stager_;
};

TEST_P(StepWordsTest, AReaderThatSeesALayersWordSeesEveryRowOfIt) {
  constexpr size_t kSteps = 48, kTokens = 6, kLayers = 2;
  const std::vector<uint32_t> text = StepTokens(kSteps * kTokens + 3, 17);
  std::span<const uint32_t> all(text);
  std::vector<std::vector<uint64_t>> ids;  // each step's [token][layer][slot]
  for (size_t k = 0; k < kSteps; ++k) {
    ids.push_back(StepIds(*stager_, all.first(3 + k * kTokens), all.subspan(3 + k * kTokens, kTokens)));
  }
  // One out and one set of words for every step, as a runtime's ring slot.
  std::vector<std::byte> out(stager_->OutputBytes(kTokens));
  std::vector<uint32_t> words(kLayers, 0);
  std::atomic<uint32_t> checked{0};  // the last step the reader has checked whole
  std::vector<std::string> failures;

  std::thread reader([&] {
    for (uint32_t seq = 1; seq <= kSteps; ++seq) {
      for (size_t layer = 0; layer < kLayers; ++layer) {
        uint32_t word;
        while ((word = std::atomic_ref<uint32_t>(words[layer]).load(std::memory_order_acquire)) != seq) {
          if (word == (seq | kStepWordFailed)) break;
          std::this_thread::yield();
        }
        if (word != seq) {
          failures.push_back("step " + std::to_string(seq) + " layer " + std::to_string(layer) + " failed");
        } else if (!testing::LayerHoldsRows(out.data(), ids[seq - 1], kLayers, stager_->rows_per_token(), layer)) {
          failures.push_back("step " + std::to_string(seq) + " layer " + std::to_string(layer) +
                             ": its word was stored before its rows");
        }
      }
      checked.store(seq, std::memory_order_release);
    }
  });

  uint64_t hits = 0, misses = 0;
  for (uint32_t seq = 1; seq <= kSteps; ++seq) {
    const size_t k = seq - 1;
    StepCompletion c;
    c.words = words;
    c.sequence = seq;
    std::span<const uint32_t> history = all.first(3 + k * kTokens), step = all.subspan(3 + k * kTokens, kTokens);
    // Every form, in turn: the words are stored by this thread (Stage,
    // GatherStep) or by the store's and the stager's threads.
    StageTicket ticket;
    StageResult r;
    switch (k % 4) {
      case 0: r = stager_->Stage(history, step, out.data(), c); break;
      case 1: ticket = stager_->Start(history, step, out.data(), nullptr, c); break;
      case 2: r = stager_->GatherStep(ids[k], out.data(), c); break;
      case 3: ticket = stager_->StartGatherStep(ids[k], out.data(), nullptr, c); break;
    }
    // The next step rewrites out: only once the reader has checked this one.
    while (checked.load(std::memory_order_acquire) != seq) std::this_thread::yield();
    if (ticket.valid()) r = ticket.Wait();
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();  // not ASSERT: the reader must still be joined
    hits += r.hits;
    misses += r.misses;
  }
  reader.join();
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_GT(hits, 0u);
  EXPECT_GT(misses, 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, StepWordsTest, ::testing::Values("pread", "io_uring"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace engram
