// Redis Cluster routing without a server: CRC16 and hash tags against the values in the Redis
// Cluster specification, the slot map read from a CLUSTER SLOTS reply (and refused when
// malformed), a property test of SlotMap::Assign against a plain array, MOVED/ASK parsing.
#include "kvredis/cluster_slots.h"

#include <gtest/gtest.h>

#include <array>
#include <random>

namespace kvforge::kvredis {
namespace {

RedisReply Int(long long v) {
  RedisReply r;
  r.type = RedisReply::Type::kInteger;
  r.integer = v;
  return r;
}
RedisReply Str(std::string s) {
  RedisReply r;
  r.type = RedisReply::Type::kString;
  r.str = std::move(s);
  return r;
}
RedisReply Arr(std::vector<RedisReply> e) {
  RedisReply r;
  r.type = RedisReply::Type::kArray;
  r.elements = std::move(e);
  return r;
}
RedisReply Err(std::string s) {
  RedisReply r;
  r.type = RedisReply::Type::kError;
  r.str = std::move(s);
  return r;
}
RedisReply Range(int lo, int hi, std::string host, int port) {
  return Arr({Int(lo), Int(hi), Arr({Str(std::move(host)), Int(port), Str("id")})});
}

TEST(ClusterSlots, Crc16AndKeySlotMatchTheSpecification) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);  // the XMODEM check value the spec gives
  EXPECT_EQ(KeySlot("foo"), 12182);
  EXPECT_EQ(KeySlot("bar"), 5061);
  EXPECT_EQ(KeySlot("123456789"), 0x31C3 % 16384);
}

TEST(ClusterSlots, HashTags) {
  EXPECT_EQ(HashTag("{user1000}.following"), "user1000");
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(HashTag("foo{}{bar}"), "foo{}{bar}");  // empty first tag: the whole key
  EXPECT_EQ(HashTag("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(HashTag("foo{bar}{zap}"), "bar");
  EXPECT_EQ(HashTag("no tag"), "no tag");
  EXPECT_EQ(HashTag("open{only"), "open{only");
}

TEST(ClusterSlots, MapFromClusterSlots) {
  const RedisEndpoint asked{"10.0.0.9", 7000};
  const RedisReply reply = Arr({Range(5461, 10922, "127.0.0.1", 7001),
                                Range(0, 5460, "127.0.0.1", 7000), Range(10923, 16383, "", 7002)});
  Result<SlotMap> m = SlotMap::FromClusterSlots(reply, asked);
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_EQ(m->MasterOf(0)->port, 7000);
  EXPECT_EQ(m->MasterOf(5460)->port, 7000);
  EXPECT_EQ(m->MasterOf(5461)->port, 7001);
  EXPECT_EQ(m->MasterOf(16383)->port, 7002);
  EXPECT_EQ(m->MasterOf(16383)->host, "10.0.0.9") << "an empty host is the node asked";
  EXPECT_EQ(m->Masters().size(), 3u);
}

TEST(ClusterSlots, MalformedMapsAreRefused) {
  const RedisEndpoint asked{"h", 1};
  EXPECT_FALSE(SlotMap::FromClusterSlots(Str("x"), asked).ok());
  EXPECT_FALSE(SlotMap::FromClusterSlots(Arr({Arr({Int(0)})}), asked).ok());
  EXPECT_FALSE(SlotMap::FromClusterSlots(Arr({Range(10, 5, "h", 1)}), asked).ok());
  EXPECT_FALSE(SlotMap::FromClusterSlots(Arr({Range(0, 16384, "h", 1)}), asked).ok());
  EXPECT_FALSE(SlotMap::FromClusterSlots(Arr({Range(0, 10, "h", 0)}), asked).ok());
  EXPECT_FALSE(
      SlotMap::FromClusterSlots(Arr({Range(0, 10, "h", 1), Range(5, 20, "h", 2)}), asked).ok());
  const Result<SlotMap> gap = SlotMap::FromClusterSlots(Arr({Range(0, 10, "h", 1)}), asked);
  ASSERT_TRUE(gap.ok());
  EXPECT_FALSE(gap->MasterOf(11).has_value()) << "an uncovered slot has no master";
}

TEST(ClusterSlots, AssignMatchesAPlainArrayOverRandomMoves) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int> model(kClusterSlots, -1);  // slot -> port, -1 uncovered
    std::vector<RedisReply> ranges;
    int lo = 0;
    for (int port = 1; lo < kClusterSlots; ++port) {
      const int hi = std::min(kClusterSlots - 1, lo + static_cast<int>(rng() % 6000));
      if (rng() % 5 != 0) {  // leave some ranges uncovered
        ranges.push_back(Range(lo, hi, "h", port));
        for (int s = lo; s <= hi; ++s) model[s] = port;
      }
      lo = hi + 1;
    }
    Result<SlotMap> m = SlotMap::FromClusterSlots(Arr(ranges), {"h", 1});
    ASSERT_TRUE(m.ok());
    for (int step = 0; step < 100; ++step) {
      const int slot = static_cast<int>(rng() % kClusterSlots);
      const int port = 1 + static_cast<int>(rng() % 9);
      m->Assign(slot, {"h", port});
      model[slot] = port;
      for (int probe = 0; probe < 20; ++probe) {
        const int s = probe < 3 ? std::clamp(slot - 1 + probe, 0, kClusterSlots - 1)
                                : static_cast<int>(rng() % kClusterSlots);
        const std::optional<RedisEndpoint> got = m->MasterOf(s);
        ASSERT_EQ(got ? got->port : -1, model[s]) << "trial " << trial << " slot " << s;
      }
    }
  }
}

TEST(ClusterSlots, Redirects) {
  std::optional<Redirect> r = ParseRedirect(Err("MOVED 3999 127.0.0.1:6381"));
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->ask);
  EXPECT_EQ(r->slot, 3999);
  EXPECT_EQ(r->to, (RedisEndpoint{"127.0.0.1", 6381}));
  r = ParseRedirect(Err("ASK 12 10.1.2.3:7002"));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->ask);
  EXPECT_EQ(r->to.port, 7002);
  r = ParseRedirect(Err("MOVED 7 ::1:7003"));  // Redis writes IPv6 hosts without brackets
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to, (RedisEndpoint{"::1", 7003}));
  r = ParseRedirect(Err("MOVED 7 :7004"));  // no host: the node that replied
  ASSERT_TRUE(r);
  EXPECT_EQ(r->to, (RedisEndpoint{"", 7004}));
  EXPECT_FALSE(ParseRedirect(Err("ERR unknown command")));
  EXPECT_FALSE(ParseRedirect(Err("MOVED 99999 h:1")));
  EXPECT_FALSE(ParseRedirect(Err("MOVED 12 nohostport")));
  EXPECT_FALSE(ParseRedirect(Str("MOVED 12 h:1"))) << "only an error reply redirects";
}

}  // namespace
}  // namespace kvforge::kvredis
