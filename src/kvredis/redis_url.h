// kvredis/redis_url.h — where a Redis (or Redis Cluster) server is, from a URL:
//   redis://[[user]:password@]host[:port][,host[:port]...][/db]
// Several comma-separated hosts are the seeds of a cluster (any one that answers will do); a
// single host may be a cluster node too, which the client finds out for itself.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::kvredis {

struct RedisEndpoint {
  std::string host;
  int port = 6379;
  std::string ToString() const { return host + ":" + std::to_string(port); }
  friend bool operator==(const RedisEndpoint&, const RedisEndpoint&) = default;
};

struct RedisUrl {
  std::vector<RedisEndpoint> seeds;  // at least one
  std::string user;                  // "" with a password: AUTH password (the default user)
  std::string password;              // "": no AUTH
  int db = 0;                        // SELECT db (single node only; clusters have db 0)
};

Result<RedisUrl> ParseRedisUrl(std::string_view url);
// "host:port" (as in MOVED replies and CLUSTER SLOTS); the port is required.
Result<RedisEndpoint> ParseEndpoint(std::string_view text);

}  // namespace kvforge::kvredis
