// The Redis tier against a real redis-server started by the test (random loopback port): records
// round-trip byte for byte, a random operation sequence matches a map, two tiers (two engine
// instances) share records, and every failure is a miss with a bounded wait: a killed server, a
// stopped one (SIGSTOP), a restarted one (the tier recovers), a full one (noeviction), bad
// credentials, nothing listening at start.
#include "kvredis/redis_tier.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "support/redis_server.h"

namespace kvforge::kvredis {
namespace {

using kvstore::KvTier;
using kvstore::TierKey;
using testing::RedisServer;
using Clock = std::chrono::steady_clock;

#define REQUIRE_REDIS()                                                      \
  do {                                                                       \
    if (!testing::HaveRedisServer()) GTEST_SKIP() << "redis-server missing"; \
  } while (0)

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  if (n > 2) v[1] = 0;  // binary-safe: a NUL inside
  return v;
}

TierKey Key(uint64_t i) { return TierKey{0xfeedull, i, i * 0x9e3779b97f4a7c15ull}; }

RedisTierOptions Fast() {
  RedisTierOptions o;
  o.timeout_ms = 100;
  o.retry_after_ms = 50;
  return o;
}

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Retries `op` until it holds, for at most 10 s (a restarted server, a back-off running out).
template <typename F>
bool Eventually(F op) {
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < until) {
    if (op()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return op();
}

TEST(RedisTier, RoundTripsAndShares) {
  REQUIRE_REDIS();
  RedisServer server;
  ASSERT_TRUE(server.ok());
  auto a = MakeRedisTier(server.url(), Fast());
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  auto b = MakeRedisTier(server.url(), Fast());
  ASSERT_TRUE(b.ok());
  KvTier& ta = **a;
  KvTier& tb = **b;
  EXPECT_EQ(ta.name(), "redis");
  EXPECT_NE(ta.Describe().find(std::to_string(server.port())), std::string::npos) << ta.Describe();
  const std::vector<uint8_t> big = Bytes(3 << 20, 5);  // several MiB in one value
  ASSERT_TRUE(ta.Put(Key(1), big).ok());
  ASSERT_TRUE(ta.Put(Key(2), Bytes(10, 6)).ok());
  EXPECT_TRUE(tb.Contains(Key(1))) << "another instance sees the record";
  std::optional<std::vector<uint8_t>> got = tb.Get(Key(1));
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, big);
  EXPECT_FALSE(tb.Get(Key(3)));
  const TierKey probe[] = {Key(9), Key(3), Key(2), Key(1)};
  EXPECT_EQ(tb.ContainsAny(probe), 2u) << "the first held key, in one round trip";
  EXPECT_EQ(tb.ContainsAny(std::span<const TierKey>(probe, 2)), 2u) << "none: the size";
  tb.Erase(Key(2));
  EXPECT_FALSE(ta.Contains(Key(2)));
  EXPECT_NE(server.Command("EXISTS " + RedisKeyOf(Key(1))).find(":1"), std::string::npos)
      << "the key format is the documented one";
  const KvTierStats s = tb.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.bytes_out, big.size());
  EXPECT_EQ(ta.stats().puts, 2);
  EXPECT_EQ(ta.stats().errors, 0);
}

TEST(RedisTier, RandomOperationsMatchAMap) {
  REQUIRE_REDIS();
  RedisServer server;
  ASSERT_TRUE(server.ok());
  auto tier = MakeRedisTier(server.url(), Fast());
  ASSERT_TRUE(tier.ok());
  std::map<uint64_t, std::vector<uint8_t>> model;
  std::mt19937 rng(11);
  for (int step = 0; step < 600; ++step) {
    const uint64_t k = rng() % 24;
    switch (rng() % 4) {
      case 0: {
        const std::vector<uint8_t> v = Bytes(1 + rng() % 5000, static_cast<uint8_t>(step));
        ASSERT_TRUE((*tier)->Put(Key(k), v).ok());
        model[k] = v;
        break;
      }
      case 1: {
        const std::optional<std::vector<uint8_t>> got = (*tier)->Get(Key(k));
        const auto it = model.find(k);
        ASSERT_EQ(got.has_value(), it != model.end()) << "step " << step;
        if (got) {
          ASSERT_EQ(*got, it->second);
        }
        break;
      }
      case 2:
        (*tier)->Erase(Key(k));
        model.erase(k);
        break;
      default: {
        std::vector<TierKey> keys;
        for (int i = 0; i < 4; ++i) keys.push_back(Key(rng() % 24));
        size_t want = keys.size();
        for (size_t i = 0; i < keys.size() && want == keys.size(); ++i)
          if (model.count(keys[i].a)) want = i;
        ASSERT_EQ((*tier)->ContainsAny(keys), want) << "step " << step;
      }
    }
  }
  EXPECT_EQ((*tier)->stats().errors, 0);
}

TEST(RedisTier, NothingListeningAtStartIsAClearError) {
  REQUIRE_REDIS();
  int port = 0;
  {
    RedisServer gone;
    ASSERT_TRUE(gone.ok());
    port = gone.port();
  }  // killed: nothing listens there now
  auto tier = MakeRedisTier("redis://127.0.0.1:" + std::to_string(port), Fast());
  ASSERT_FALSE(tier.ok());
  EXPECT_NE(tier.error().message().find(std::to_string(port)), std::string::npos)
      << tier.error().ToString();
  EXPECT_FALSE(MakeRedisTier("not-a-url", Fast()).ok());
}

TEST(RedisTier, BadPasswordAndBadDatabaseAreRefused) {
  REQUIRE_REDIS();
  RedisServer server({"--requirepass", "right"});
  ASSERT_TRUE(server.ok());
  auto wrong = MakeRedisTier("redis://:wrong@127.0.0.1:" + std::to_string(server.port()), Fast());
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message().find("AUTH"), std::string::npos) << wrong.error().ToString();
  auto none = MakeRedisTier(server.url(), Fast());
  EXPECT_FALSE(none.ok()) << "no password against a server that needs one";
  auto right =
      MakeRedisTier("redis://:right@127.0.0.1:" + std::to_string(server.port()) + "/3", Fast());
  ASSERT_TRUE(right.ok()) << right.error().ToString();
  ASSERT_TRUE((*right)->Put(Key(1), Bytes(8, 1)).ok());
  EXPECT_TRUE((*right)->Get(Key(1)));
  auto bad_db =
      MakeRedisTier("redis://:right@127.0.0.1:" + std::to_string(server.port()) + "/99", Fast());
  EXPECT_FALSE(bad_db.ok()) << "SELECT 99 is out of range";
}

TEST(RedisTier, AKilledServerIsAMissAndARestartedOneIsUsedAgain) {
  REQUIRE_REDIS();
  RedisServer server;
  ASSERT_TRUE(server.ok());
  auto tier = MakeRedisTier(server.url(), Fast());
  ASSERT_TRUE(tier.ok());
  KvTier& t = **tier;
  ASSERT_TRUE(t.Put(Key(1), Bytes(100, 1)).ok());
  ASSERT_TRUE(t.Get(Key(1)));  // a pooled connection now exists
  server.Kill();
  const auto t0 = Clock::now();
  EXPECT_FALSE(t.Get(Key(1)));
  EXPECT_FALSE(t.Contains(Key(1)));
  EXPECT_FALSE(t.Put(Key(2), Bytes(100, 2)).ok());
  EXPECT_LT(SecondsSince(t0), 5.0) << "a dead server must cost a bounded wait";
  EXPECT_GE(t.stats().errors, 1);
  ASSERT_TRUE(server.Restart());
  // The old records are gone with the process (no persistence); new ones work once the back-off
  // has run out.
  EXPECT_TRUE(Eventually([&] { return t.Put(Key(3), Bytes(50, 3)).ok(); }))
      << "the tier never reconnected";
  std::optional<std::vector<uint8_t>> got = t.Get(Key(3));
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, Bytes(50, 3));
}

TEST(RedisTier, AStoppedServerTimesOutAndIsSkipped) {
  REQUIRE_REDIS();
  RedisServer server;
  ASSERT_TRUE(server.ok());
  RedisTierOptions o = Fast();
  o.retry_after_ms = 60000;  // once failed, skipped for the rest of the test
  auto tier = MakeRedisTier(server.url(), o);
  ASSERT_TRUE(tier.ok());
  KvTier& t = **tier;
  ASSERT_TRUE(t.Put(Key(1), Bytes(100, 1)).ok());
  server.Pause();
  auto t0 = Clock::now();
  EXPECT_FALSE(t.Get(Key(1))) << "a stopped server answers nothing";
  const double first = SecondsSince(t0);
  EXPECT_LT(first, 5.0) << "the time-out bounds the wait";
  t0 = Clock::now();
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(t.Get(Key(1)));
  EXPECT_LT(SecondsSince(t0), 1.0) << "a failed server is skipped, not waited on 20 times";
  server.Resume();
  EXPECT_GE(t.stats().errors, 21);
}

TEST(RedisTier, AFullServerRefusesWritesAndTheTierCountsThem) {
  REQUIRE_REDIS();
  RedisServer server({"--maxmemory", "8mb", "--maxmemory-policy", "noeviction"});
  ASSERT_TRUE(server.ok());
  auto tier = MakeRedisTier(server.url(), Fast());
  ASSERT_TRUE(tier.ok());
  EXPECT_EQ((*tier)->stats().capacity_bytes, 8u << 20) << "maxmemory is reported as capacity";
  ASSERT_TRUE((*tier)->Put(Key(0), Bytes(1 << 20, 1)).ok()) << "the first MiB fits";
  Status last;
  for (int i = 1; i < 20 && last.ok(); ++i) last = (*tier)->Put(Key(i), Bytes(1 << 20, 1));
  EXPECT_EQ(last.code(), StatusCode::kResourceExhausted) << last.ToString();
  EXPECT_GE((*tier)->stats().errors, 1);
  EXPECT_TRUE((*tier)->Get(Key(0))) << "what was stored is still served";
}

TEST(RedisTier, TtlExpiresRecords) {
  REQUIRE_REDIS();
  RedisServer server;
  ASSERT_TRUE(server.ok());
  RedisTierOptions o = Fast();
  o.ttl_seconds = 100;
  auto tier = MakeRedisTier(server.url(), o);
  ASSERT_TRUE(tier.ok());
  ASSERT_TRUE((*tier)->Put(Key(1), Bytes(10, 1)).ok());
  const std::string ttl = server.Command("TTL " + RedisKeyOf(Key(1)));  // ":100\r\n" or ":99"
  ASSERT_FALSE(ttl.empty());
  EXPECT_EQ(ttl[0], ':');
  EXPECT_GT(std::atoi(ttl.c_str() + 1), 0) << ttl;
}

}  // namespace
}  // namespace kvforge::kvredis
