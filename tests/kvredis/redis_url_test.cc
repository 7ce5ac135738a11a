// Redis URLs: the forms users write, and clear errors for the rest.
#include "kvredis/redis_url.h"

#include <gtest/gtest.h>

namespace kvforge::kvredis {
namespace {

TEST(RedisUrl, Forms) {
  Result<RedisUrl> u = ParseRedisUrl("redis://127.0.0.1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->seeds, (std::vector<RedisEndpoint>{{"127.0.0.1", 6379}}));
  EXPECT_EQ(u->db, 0);
  u = ParseRedisUrl("redis://:s3cret@cache.local:7000/2");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->password, "s3cret");
  EXPECT_EQ(u->user, "");
  EXPECT_EQ(u->seeds.front(), (RedisEndpoint{"cache.local", 7000}));
  EXPECT_EQ(u->db, 2);
  u = ParseRedisUrl("redis://kv:pw@h1:7000,h2:7001,[::1]:7002");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->user, "kv");
  ASSERT_EQ(u->seeds.size(), 3u);
  EXPECT_EQ(u->seeds[2], (RedisEndpoint{"::1", 7002}));
}

TEST(RedisUrl, BadUrlsAreRefused) {
  for (const char* bad : {"127.0.0.1:6379", "http://h", "redis://", "redis://h:0", "redis://h:x",
                          "redis://h:70000", "redis://h/x", "redis://h/-1", "redis://:@h",
                          "redis://[::1", "redis://h1,,h2", "redis://h:1:"}) {
    EXPECT_FALSE(ParseRedisUrl(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParseEndpoint("host").ok()) << "a redirect names its port";
  EXPECT_TRUE(ParseEndpoint("host:1").ok());
}

}  // namespace
}  // namespace kvforge::kvredis
