// FairMissScheduler alone: the order in which gather threads take clients'
// units of missed rows.
#include "src/node/fair_miss_scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace engram {
namespace {

using node::FairMissScheduler;

// Takes and reads the next n units, as one gather thread would.
void TakeAndRun(FairMissScheduler& s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    FairMissScheduler::Unit u;
    if (!s.Take(&u)) return;
    u.work();
    s.Done(u);
  }
}

struct Order {
  std::vector<uint64_t> clients;
  FairMissScheduler::Work For(uint64_t client) {
    return [this, client] { clients.push_back(client); };
  }
};

TEST(FairMissSchedulerTest, ASmallGatherIsTakenBeforeTheRestOfAnotherClientsBulk) {
  FairMissScheduler s(/*quantum_rows=*/128);
  Order order;
  for (int i = 0; i < 100; ++i) s.Submit(1, 128, order.For(1));
  // Two gather threads are reading client 1's first units.
  FairMissScheduler::Unit reading[2];
  ASSERT_TRUE(s.Take(&reading[0]));
  ASSERT_TRUE(s.Take(&reading[1]));
  EXPECT_EQ(s.rows_in_flight(), 256u);
  EXPECT_EQ(s.rows_queued(), 98u * 128);
  // Client 2's decode step arrives behind all of client 1's bulk.
  s.Submit(2, 96, order.For(2));
  TakeAndRun(s, 2);
  // Client 1's credit went with the unit being read: client 2's turn is next.
  ASSERT_EQ(order.clients.size(), 2u);
  EXPECT_EQ(order.clients[0], 2u) << "the small gather waited behind the bulk";
  EXPECT_EQ(order.clients[1], 1u);
}

TEST(FairMissSchedulerTest, BusyClientsShareTheRowsEvenlyWhateverTheirUnitSizes) {
  FairMissScheduler s(/*quantum_rows=*/128);
  uint64_t rows[3] = {0, 0, 0};
  for (int i = 0; i < 50; ++i) s.Submit(1, 128, [&] { rows[1] += 128; });
  for (int i = 0; i < 200; ++i) s.Submit(2, 32, [&] { rows[2] += 32; });
  // Units while both still have some queued: by rows, each gets half.
  for (int i = 0; i < 120; ++i) {
    FairMissScheduler::Unit u;
    ASSERT_TRUE(s.Take(&u));
    u.work();
    s.Done(u);
  }
  const double share = double(rows[1]) / double(rows[1] + rows[2]);
  EXPECT_NEAR(share, 0.5, 0.05) << rows[1] << " rows against " << rows[2];
}

TEST(FairMissSchedulerTest, AForgottenClientsQueuedUnitsAreNeverTaken) {
  FairMissScheduler s(/*quantum_rows=*/128);
  Order order;
  for (int i = 0; i < 5; ++i) s.Submit(1, 128, order.For(1));
  s.Submit(2, 10, order.For(2));
  FairMissScheduler::Unit first;
  ASSERT_TRUE(s.Take(&first));  // client 1's first unit is being read
  s.Forget(1);
  EXPECT_EQ(s.rows_queued(), 10u);
  first.work();
  s.Done(first);
  FairMissScheduler::Unit next;
  ASSERT_TRUE(s.Take(&next));
  next.work();
  s.Done(next);
  EXPECT_EQ(order.clients, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s.rows_in_flight(), 0u);
  EXPECT_EQ(s.rows_queued(), 0u);
}

TEST(FairMissSchedulerTest, APausedClientsUnitsWaitWhileOthersAreTaken) {
  FairMissScheduler s(/*quantum_rows=*/128);
  Order order;
  for (int i = 0; i < 3; ++i) s.Submit(1, 128, order.For(1));
  s.Submit(2, 64, order.For(2));
  s.Submit(2, 64, order.For(2));
  s.Pause(1);
  TakeAndRun(s, 2);
  EXPECT_EQ(order.clients, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(s.rows_queued(), 3u * 128);
  s.Resume(1);
  TakeAndRun(s, 3);
  EXPECT_EQ(order.clients, (std::vector<uint64_t>{2, 2, 1, 1, 1}));
}

TEST(FairMissSchedulerTest, StopEndsEveryWaitingTakeAndDropsWhatIsQueued) {
  FairMissScheduler s(/*quantum_rows=*/64);
  std::atomic<int> ended{0};
  std::vector<std::thread> takers;
  for (int i = 0; i < 3; ++i) {
    takers.emplace_back([&] {
      FairMissScheduler::Unit u;
      while (s.Take(&u)) {
        u.work();
        s.Done(u);
      }
      ended.fetch_add(1);
    });
  }
  s.Stop();
  for (auto& t : takers) t.join();
  EXPECT_EQ(ended.load(), 3);
  bool ran = false;
  s.Submit(1, 10, [&] { ran = true; });
  FairMissScheduler::Unit u;
  EXPECT_FALSE(s.Take(&u));
  EXPECT_FALSE(ran);
}

TEST(FairMissSchedulerTest, ConcurrentSubmittersAndGatherThreadsRunEveryUnitOnce) {
  FairMissScheduler s(/*quantum_rows=*/64);
  std::atomic<int> ran{0};
  std::vector<std::thread> gatherers;
  for (int g = 0; g < 3; ++g) {
    gatherers.emplace_back([&] {
      FairMissScheduler::Unit u;
      while (s.Take(&u)) {
        u.work();
        s.Done(u);
      }
    });
  }
  std::vector<std::thread> submitters;
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) s.Submit(uint64_t(t), uint32_t(1 + i % 64), [&] { ran.fetch_add(1); });
    });
  }
  for (auto& t : submitters) t.join();
  while (s.rows_queued() != 0 || s.rows_in_flight() != 0) std::this_thread::yield();
  s.Stop();
  for (auto& t : gatherers) t.join();
  EXPECT_EQ(ran.load(), 8000);
}

}  // namespace
}  // namespace engram
