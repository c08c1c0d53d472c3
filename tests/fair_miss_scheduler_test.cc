// FairMissScheduler alone: the order in which clients' units of missed rows
// start, with units that finish when the test says.
#include "src/node/fair_miss_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace engram {
namespace {

using node::FairMissScheduler;

struct Recorder {
  struct Started {
    uint64_t client;
    uint32_t rows;
    FairMissScheduler::Finished finished;
  };
  std::vector<Started> started;
  FairMissScheduler::Start For(uint64_t client, uint32_t rows) {
    return [this, client, rows](FairMissScheduler::Finished f) { started.push_back({client, rows, std::move(f)}); };
  }
  // Finishes the oldest unfinished unit.
  void FinishNext() {
    for (Started& s : started) {
      if (s.finished) {
        auto f = std::move(s.finished);
        s.finished = nullptr;
        f();
        return;
      }
    }
    FAIL() << "no unit to finish";
  }
};

TEST(FairMissSchedulerTest, ASmallGatherStartsAfterOneQuantumOfAnotherClientsBulk) {
  FairMissScheduler scheduler({/*window_rows=*/256, /*quantum_rows=*/128});
  Recorder r;
  // Client 1's bulk: 100 units of 128 rows; two fill the window.
  for (int i = 0; i < 100; ++i) scheduler.Submit(1, 128, r.For(1, 128));
  ASSERT_EQ(r.started.size(), 2u);
  EXPECT_EQ(scheduler.rows_in_flight(), 256u);
  EXPECT_EQ(scheduler.rows_queued(), 98u * 128);
  // Client 2's decode step arrives behind all of it.
  scheduler.Submit(2, 96, r.For(2, 96));
  ASSERT_EQ(r.started.size(), 2u) << "the window is full: nothing starts";
  // Client 1's turn came first: one quantum of it, then client 2's turn.
  r.FinishNext();
  ASSERT_EQ(r.started.size(), 3u);
  EXPECT_EQ(r.started[2].client, 1u);
  r.FinishNext();
  ASSERT_GE(r.started.size(), 4u);
  EXPECT_EQ(r.started[3].client, 2u) << "the small gather waited for more than one quantum of the bulk";
}

TEST(FairMissSchedulerTest, BusyClientsShareTheRowsEvenlyWhateverTheirUnitSizes) {
  FairMissScheduler scheduler({/*window_rows=*/1, /*quantum_rows=*/128});
  Recorder r;
  // Client 1 sends units of 128 rows, client 2 units of 32: by rows, each
  // gets half.
  for (int i = 0; i < 50; ++i) scheduler.Submit(1, 128, r.For(1, 128));
  for (int i = 0; i < 200; ++i) scheduler.Submit(2, 32, r.For(2, 32));
  uint64_t rows[3] = {0, 0, 0};
  for (int i = 0; i < 120; ++i) {
    ASSERT_FALSE(r.started.empty());
    rows[r.started.back().client] += r.started.back().rows;
    r.FinishNext();
  }
  const double share = double(rows[1]) / double(rows[1] + rows[2]);
  EXPECT_NEAR(share, 0.5, 0.05) << rows[1] << " rows against " << rows[2];
}

TEST(FairMissSchedulerTest, AClientAloneGetsTheWholeWindow) {
  FairMissScheduler scheduler({/*window_rows=*/512, /*quantum_rows=*/128});
  Recorder r;
  for (int i = 0; i < 10; ++i) scheduler.Submit(7, 128, r.For(7, 128));
  EXPECT_EQ(r.started.size(), 4u);
  EXPECT_EQ(scheduler.rows_in_flight(), 512u);
}

TEST(FairMissSchedulerTest, AForgottenClientsQueuedUnitsNeverStart) {
  FairMissScheduler scheduler({/*window_rows=*/128, /*quantum_rows=*/128});
  Recorder r;
  for (int i = 0; i < 5; ++i) scheduler.Submit(1, 128, r.For(1, 128));
  scheduler.Submit(2, 10, r.For(2, 10));
  ASSERT_EQ(r.started.size(), 1u);
  scheduler.Forget(1);
  EXPECT_EQ(scheduler.rows_queued(), 10u);
  r.FinishNext();  // client 1's unit that had started finishes as usual
  ASSERT_EQ(r.started.size(), 2u);
  EXPECT_EQ(r.started[1].client, 2u);
  r.FinishNext();
  EXPECT_EQ(scheduler.rows_in_flight(), 0u);
  EXPECT_EQ(scheduler.rows_queued(), 0u);
}

TEST(FairMissSchedulerTest, AUnitFinishingInsideItsStartDoesNotNestStarts) {
  FairMissScheduler scheduler({/*window_rows=*/64, /*quantum_rows=*/64});
  int depth = 0, deepest = 0, started = 0;
  for (int i = 0; i < 1000; ++i) {
    scheduler.Submit(uint64_t(i % 3), 64, [&](FairMissScheduler::Finished f) {
      ++depth;
      deepest = std::max(deepest, depth);
      ++started;
      f();  // all its rows hit: done at once
      --depth;
    });
  }
  EXPECT_EQ(started, 1000);
  EXPECT_EQ(deepest, 1) << "a start ran inside another start";
  EXPECT_EQ(scheduler.rows_in_flight(), 0u);
}

TEST(FairMissSchedulerTest, ConcurrentSubmitsAndFinishesStartEveryUnitOnce) {
  FairMissScheduler scheduler({/*window_rows=*/256, /*quantum_rows=*/64});
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  std::mutex finishers_mu;
  std::vector<std::thread> finishers;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        scheduler.Submit(uint64_t(t), uint32_t(1 + i % 64), [&](FairMissScheduler::Finished f) {
          started.fetch_add(1);
          // Half finish on another thread, as a gather's completion does.
          if (started.load() % 2 == 0) {
            std::lock_guard lock(finishers_mu);
            finishers.emplace_back([f = std::move(f)] { f(); });
          } else {
            f();
          }
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  // Finishers start more units, whose finishers may start more: join until
  // none is left.
  for (;;) {
    std::vector<std::thread> batch;
    {
      std::lock_guard lock(finishers_mu);
      batch.swap(finishers);
    }
    if (batch.empty()) break;
    for (auto& t : batch) t.join();
  }
  EXPECT_EQ(started.load(), 8000);
  EXPECT_EQ(scheduler.rows_in_flight(), 0u);
  EXPECT_EQ(scheduler.rows_queued(), 0u);
}

}  // namespace
}  // namespace engram
