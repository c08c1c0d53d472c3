// InflightRows alone: clients missing the same rows at once cause one read,
// deterministically (the gathers complete when the test says).
#include "src/node/inflight_rows.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <vector>

namespace engram {
namespace {

// A request's rows another request is reading wait for that read.
TEST(InflightRowsTest, RowsInFlightForAnotherRequestAreTakenFromItsRead) {
  node::InflightRows inflight;
  struct Started {
    std::vector<uint64_t> ids;
    std::byte* dst;
    std::function<void(GatherResult)> done;
  };
  std::vector<Started> started;
  auto start = [&](std::span<const uint64_t> ids, std::byte* dst, size_t, std::function<void(GatherResult)> done) {
    started.push_back({{ids.begin(), ids.end()}, dst, std::move(done)});
  };
  constexpr uint32_t kBytes = 8;
  auto fill = [&](Started& s) {
    for (size_t i = 0; i < s.ids.size(); ++i) std::memcpy(s.dst + i * kBytes, &s.ids[i], kBytes);
  };
  std::vector<std::pair<GatherResult, std::vector<uint64_t>>> answers;
  std::vector<uint64_t> first_rows(3), second_rows(3);
  auto answer_with = [&](std::vector<uint64_t>& rows) {
    return [&](const GatherResult& r) { answers.push_back({r, rows}); };
  };
  inflight.Gather({1, 2, 3}, kBytes, reinterpret_cast<uint8_t*>(first_rows.data()), start, answer_with(first_rows));
  inflight.Gather({2, 3, 4}, kBytes, reinterpret_cast<uint8_t*>(second_rows.data()), start, answer_with(second_rows));
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[1].ids, (std::vector<uint64_t>{4})) << "only the row nobody reads is read";
  EXPECT_EQ(inflight.rows_in_flight(), 4u);
  fill(started[1]);
  started[1].done(GatherResult{});
  EXPECT_TRUE(answers.empty()) << "answered before the rows it shares landed";
  fill(started[0]);
  GatherResult first;
  first.misses = 3;
  started[0].done(first);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].second, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(answers[0].first.hits, 2u);
  EXPECT_EQ(answers[1].second, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(inflight.rows_in_flight(), 0u);
}

TEST(InflightRowsTest, AFailedRowFailsEveryRequestWaitingForIt) {
  node::InflightRows inflight;
  std::vector<std::function<void(GatherResult)>> dones;
  auto start = [&](std::span<const uint64_t>, std::byte*, size_t, std::function<void(GatherResult)> done) {
    dones.push_back(std::move(done));
  };
  std::vector<GatherResult> answers;
  auto answer = [&](const GatherResult& r) { answers.push_back(r); };
  std::vector<uint8_t> first_rows(8), second_rows(8);
  inflight.Gather({10, 11}, 4, first_rows.data(), start, answer);
  inflight.Gather({12, 11}, 4, second_rows.data(), start, answer);
  ASSERT_EQ(dones.size(), 2u);
  dones[1](GatherResult{});
  GatherResult failed;
  failed.status = Status::Corruption("block 3 failed its checksum");
  failed.failed_positions = {1};  // row 11
  dones[0](failed);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].status.code(), StatusCode::kCorruption);
  EXPECT_EQ(answers[0].failed_positions, (std::vector<size_t>{1}));
  EXPECT_EQ(answers[1].failed_positions, (std::vector<size_t>{1}));
}

// A row asked for twice in one request is read once and answered at both
// positions (a request that waited for itself would never be answered).
TEST(InflightRowsTest, ARowAskedForTwiceIsReadOnceAndAnsweredTwice) {
  node::InflightRows inflight;
  std::vector<std::vector<uint64_t>> read;
  constexpr uint32_t kBytes = 8;
  auto start = [&](std::span<const uint64_t> ids, std::byte* dst, size_t, std::function<void(GatherResult)> done) {
    read.emplace_back(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size(); ++i) std::memcpy(dst + i * kBytes, &ids[i], kBytes);
    done(GatherResult{});
  };
  std::vector<uint64_t> rows(4, 0);
  int answers = 0;
  inflight.Gather({7, 8, 7, 7}, kBytes, reinterpret_cast<uint8_t*>(rows.data()), start,
                  [&](const GatherResult& r) {
                    ++answers;
                    EXPECT_TRUE(r.status.ok());
                  });
  EXPECT_EQ(answers, 1);
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0], (std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(rows, (std::vector<uint64_t>{7, 8, 7, 7}));
  EXPECT_EQ(inflight.rows_in_flight(), 0u);
}

}  // namespace
}  // namespace engram
