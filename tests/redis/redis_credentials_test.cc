// Credentials for a cluster that requires a password (requirepass on every
// node), against a real cluster: in the URL (percent-encoded), in
// ENGRAM_REDIS_PASSWORD, wrong, and missing; never echoed in a message.
#include <cstdlib>
#include <cstring>

#include "engram/store.h"
#include "storage/redis/cluster_client.h"
#include "storage/redis/remote_table.h"
#include "storage/redis/remote_table_loader.h"
#include "tests/redis/redis_test_support.h"
#include "tests/testing/temp_table.h"

namespace engram::testing {
namespace {

constexpr const char* kPassword = "s3cret:/@pw";
constexpr const char* kEncoded = "s3cret%3A%2F%40pw";

class CredentialsTest : public SharedRedisCluster {
 protected:
  static void SetUpTestSuite() {
    LocalRedisClusterOptions o;
    o.password = kPassword;
    StartCluster(o);
  }
  void SetUp() override {
    SharedRedisCluster::SetUp();
    ::unsetenv(redis::kPasswordEnv);
    ::unsetenv(redis::kUserEnv);
  }
  void TearDown() override { ::unsetenv(redis::kPasswordEnv); }

  static std::string UrlWith(const std::string& userinfo, const std::string& name) {
    return "redis://" + userinfo + "@" + cluster().Seeds() + "/" + name;
  }
  static void ExpectRefused(const Status& s) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("credentials"), std::string::npos) << s.ToString();
    EXPECT_EQ(s.message().find("s3cret"), std::string::npos) << "a password in a message: " << s.ToString();
    EXPECT_EQ(s.message().find("wrong-one"), std::string::npos) << "a password in a message: " << s.ToString();
  }
};

TEST_F(CredentialsTest, APasswordInTheUrlLoadsAndOpensATable) {
  TempDir dir;
  const std::string file = dir.File("t.engram");
  ASSERT_TRUE(WriteGeneratedTable(file, 500, 264, 3).ok());
  auto url = redis::ParseRedisUrl(UrlWith("default:" + std::string(kEncoded), "secured"));
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->password, kPassword);
  EXPECT_EQ(url->Display().find("s3cret"), std::string::npos);
  auto source = redis::OpenFileBlockSource(file);
  ASSERT_TRUE(source.ok());
  auto loaded = redis::LoadTable(*url, **source, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();

  StoreOptions o;
  o.tables.push_back({UrlWith("default:" + std::string(kEncoded), "secured"), "", 0});
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<uint64_t> ids = {0, 250, 499};
  std::vector<std::byte> dst(ids.size() * 264);
  GatherResult r = (*store)->Gather(0, ids, dst.data(), 264);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(std::memcmp(dst.data() + 264, ExpectedRow(3, 250, 264).data(), 264), 0);
  EXPECT_EQ((*store)->Stats(0).path.find("s3cret"), std::string::npos);
}

TEST_F(CredentialsTest, ThePasswordCanComeFromTheEnvironment) {
  ::setenv(redis::kPasswordEnv, kPassword, 1);
  auto url = redis::ParseRedisUrl("redis://" + cluster().Seeds() + "/env");
  ASSERT_TRUE(url.ok());
  auto client = redis::ClusterClient::Connect(redis::ClusterOptionsFor(*url));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  redis::ClusterCommand set = redis::ClusterCommand::Set("env:key", "v");
  (*client)->Run(std::span(&set, 1));
  EXPECT_TRUE(set.status.ok()) << set.status.ToString();
}

TEST_F(CredentialsTest, AWrongPasswordIsRefusedWithoutEchoingIt) {
  auto url = redis::ParseRedisUrl(UrlWith(":wrong-one", "secured"));
  ASSERT_TRUE(url.ok());
  auto client = redis::ClusterClient::Connect(redis::ClusterOptionsFor(*url));
  ASSERT_FALSE(client.ok());
  ExpectRefused(client.status());
  StoreOptions o;
  o.tables.push_back({UrlWith(":wrong-one", "secured"), "", 0});
  auto store = Store::Open(o);
  ASSERT_FALSE(store.ok());
  ExpectRefused(store.status());
}

TEST_F(CredentialsTest, NoPasswordIsRefusedWithAHintWhereToGiveOne) {
  StoreOptions o;
  o.tables.push_back({"redis://" + cluster().Seeds() + "/secured", "", 0});
  auto store = Store::Open(o);
  ASSERT_FALSE(store.ok());
  ExpectRefused(store.status());
  EXPECT_NE(store.status().message().find(redis::kPasswordEnv), std::string::npos) << store.status().ToString();
}

}  // namespace
}  // namespace engram::testing
