// The client and tier on a real three-master Redis Cluster started by the test: records spread over
// the masters by hash slot and come back from any seed; a slot moved behind the client's back is
// followed (MOVED, then the map is re-read); a slot in migration is followed with ASKING (ASK).
#include <gtest/gtest.h>

#include <set>

#include "kvredis/cluster_slots.h"
#include "kvredis/redis_client.h"
#include "kvredis/redis_tier.h"
#include "support/redis_server.h"

namespace kvforge::kvredis {
namespace {

using kvstore::TierKey;
using testing::RedisCluster;

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 13);
  return v;
}

TierKey Key(uint64_t i) { return TierKey{0xc1u, i, ~i}; }

long long DbSize(testing::RedisServer& n) { return std::atoll(n.Command("DBSIZE").c_str() + 1); }

class RedisClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::HaveRedisServer()) GTEST_SKIP() << "redis-server missing";
    cluster_ = std::make_unique<RedisCluster>(3);
    ASSERT_TRUE(cluster_->ok()) << "the test cluster did not come up: " << cluster_->error();
  }
  // A client that knows only the first node, and reads the map from it.
  std::unique_ptr<RedisClient> Client() {
    Result<RedisUrl> url =
        ParseRedisUrl("redis://127.0.0.1:" + std::to_string(cluster_->node(0).port()));
    EXPECT_TRUE(url.ok());
    Result<std::unique_ptr<RedisClient>> c = RedisClient::Connect(*url, {});
    EXPECT_TRUE(c.ok()) << c.error().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }
  std::unique_ptr<RedisCluster> cluster_;
};

TEST_F(RedisClusterTest, RecordsSpreadOverTheMastersAndComeBack) {
  auto tier = MakeRedisTier(cluster_->url(), {});
  ASSERT_TRUE(tier.ok()) << tier.error().ToString();
  EXPECT_NE((*tier)->Describe().find("cluster, 3 masters"), std::string::npos)
      << (*tier)->Describe();
  for (uint64_t i = 0; i < 60; ++i) ASSERT_TRUE((*tier)->Put(Key(i), Bytes(300, i)).ok());
  int holding = 0;
  long long total = 0;
  for (size_t n = 0; n < cluster_->size(); ++n) {
    const long long keys = DbSize(cluster_->node(n));
    holding += keys > 0;
    total += keys;
  }
  EXPECT_EQ(total, 60);
  EXPECT_EQ(holding, 3) << "60 keys by hash slot land on every master";
  // A second instance seeded with the last node only.
  auto other = MakeRedisTier("redis://127.0.0.1:" + std::to_string(cluster_->node(2).port()), {});
  ASSERT_TRUE(other.ok());
  for (uint64_t i = 0; i < 60; ++i) {
    std::optional<std::vector<uint8_t>> got = (*other)->Get(Key(i));
    ASSERT_TRUE(got) << i;
    EXPECT_EQ(*got, Bytes(300, i));
  }
  std::vector<TierKey> probe = {Key(1000), Key(1001), Key(7)};
  EXPECT_EQ((*other)->ContainsAny(probe), 2u) << "keys on different nodes, asked at once";
  EXPECT_EQ((*other)->stats().errors, 0);
}

TEST_F(RedisClusterTest, AMovedSlotIsFollowed) {
  std::unique_ptr<RedisClient> client = Client();
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->cluster());
  const std::string key = "kvforge:test:{moved}";
  const int slot = KeySlot(key);
  const int from = cluster_->NodeOfSlot(slot);
  ASSERT_GE(from, 0);
  const int to = (from + 1) % 3;
  // Move the (empty) slot to another master on every node; the client's map is now stale.
  const std::string to_id = cluster_->NodeId(static_cast<size_t>(to));
  for (size_t n = 0; n < 3; ++n)
    ASSERT_NE(cluster_->node(n)
                  .Command("CLUSTER SETSLOT " + std::to_string(slot) + " NODE " + to_id)
                  .find("+OK"),
              std::string::npos);
  Result<RedisReply> set = client->Run(key, {"SET", key, "v1"});
  ASSERT_TRUE(set.ok()) << set.error().ToString();
  EXPECT_EQ(set->type, RedisReply::Type::kStatus) << set->str;
  EXPECT_EQ(DbSize(cluster_->node(static_cast<size_t>(to))), 1) << "written at the new owner";
  Result<RedisReply> get = client->Run(key, {"GET", key});
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->str, "v1");
}

TEST_F(RedisClusterTest, AMigratingSlotIsFollowedWithAsking) {
  std::unique_ptr<RedisClient> client = Client();
  ASSERT_TRUE(client);
  const std::string key = "kvforge:test:{asking}";
  const std::string slot = std::to_string(KeySlot(key));
  const int from = cluster_->NodeOfSlot(KeySlot(key));
  ASSERT_GE(from, 0);
  const size_t src = static_cast<size_t>(from), dst = (src + 1) % 3;
  // Mid-migration: the source still owns the slot but a key it lacks is asked at the target.
  ASSERT_NE(cluster_->node(dst)
                .Command("CLUSTER SETSLOT " + slot + " IMPORTING " + cluster_->NodeId(src))
                .find("+OK"),
            std::string::npos);
  ASSERT_NE(cluster_->node(src)
                .Command("CLUSTER SETSLOT " + slot + " MIGRATING " + cluster_->NodeId(dst))
                .find("+OK"),
            std::string::npos);
  Result<RedisReply> set = client->Run(key, {"SET", key, "v2"});
  ASSERT_TRUE(set.ok()) << set.error().ToString();
  EXPECT_EQ(set->type, RedisReply::Type::kStatus) << set->str;
  EXPECT_EQ(DbSize(cluster_->node(dst)), 1) << "an ASK writes at the importing node";
  EXPECT_EQ(DbSize(cluster_->node(src)), 0);
  Result<RedisReply> get = client->Run(key, {"GET", key});
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->str, "v2");
}

TEST_F(RedisClusterTest, ADeadMasterIsAMissNotAHang) {
  auto tier = MakeRedisTier(cluster_->url(), {});
  ASSERT_TRUE(tier.ok());
  for (uint64_t i = 0; i < 30; ++i) ASSERT_TRUE((*tier)->Put(Key(i), Bytes(64, i)).ok());
  cluster_->node(1).Kill();
  int served = 0, missed = 0;
  for (uint64_t i = 0; i < 30; ++i) {
    std::optional<std::vector<uint8_t>> got = (*tier)->Get(Key(i));
    if (got) {
      EXPECT_EQ(*got, Bytes(64, i));
      ++served;
    } else {
      ++missed;
    }
  }
  EXPECT_GT(served, 0) << "the live masters still serve their slots";
  EXPECT_GT(missed, 0) << "the dead master's keys are misses";
}

}  // namespace
}  // namespace kvforge::kvredis
