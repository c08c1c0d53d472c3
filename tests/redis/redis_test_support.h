// What the Redis Cluster tests share: one real cluster per test program
// (LocalRedisCluster, started once for all its cases: tests/CMakeLists.txt
// runs each program as one CTest test), and small helpers.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "src/common/local_redis_cluster.h"
#include "storage/redis/cluster_slot.h"

namespace engram::testing {

// A test suite whose cases share one cluster. A cluster that cannot start
// (redis-server missing, say) fails every case with the reason: CI installs
// redis-server, so these tests never skip.
class SharedRedisCluster : public ::testing::Test {
 protected:
  static void StartCluster(const LocalRedisClusterOptions& options = {}) {
    auto c = LocalRedisCluster::Start(options);
    if (c.ok()) {
      cluster_ = std::move(c).value();
    } else {
      start_error_ = c.status().ToString();
    }
  }
  static void TearDownTestSuite() { cluster_.reset(); }
  void SetUp() override { ASSERT_NE(cluster_, nullptr) << "no Redis Cluster: " << start_error_; }

  static LocalRedisCluster& cluster() { return *cluster_; }

  static inline std::unique_ptr<LocalRedisCluster> cluster_;
  static inline std::string start_error_;
};

// A hash tag whose keys hash to `slot`.
inline std::string TagForSlot(uint16_t slot) {
  for (uint64_t i = 0;; ++i) {
    std::string tag = std::string("t").append(std::to_string(i));
    if (redis::KeySlot(tag) == slot) return tag;
  }
}

}  // namespace engram::testing
