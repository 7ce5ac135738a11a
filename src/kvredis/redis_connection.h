// kvredis/redis_connection.h — one blocking connection to one Redis node, with time-outs on
// connect and on every read and write, so a stopped or unreachable server costs a bounded wait.
// A connection that failed (I/O error, time-out, protocol error) is broken for good: the caller
// drops it and connects again. Not thread-safe: one thread at a time (the client pools them).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvforge/status.h"
#include "kvredis/redis_reply.h"
#include "kvredis/redis_url.h"

struct redisContext;

namespace kvforge::kvredis {

struct RedisAuth {
  std::string user;
  std::string password;  // "": none
  int db = 0;            // 0: no SELECT
};

class RedisConnection {
 public:
  // Connects, then AUTH and SELECT as `auth` asks; `timeout_ms` bounds each step.
  static Result<std::unique_ptr<RedisConnection>> Open(const RedisEndpoint& at,
                                                       const RedisAuth& auth, int timeout_ms);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends every command, then reads every reply: one round trip. Error replies are replies; a
  // Status error means the connection failed (and is broken).
  Result<std::vector<RedisReply>> Pipeline(std::span<const RedisArgs> commands);
  Result<RedisReply> Command(const RedisArgs& args);
  bool broken() const { return broken_; }
  bool timed_out() const { return timed_out_; }  // it broke on a time-out (not a reset)
  const RedisEndpoint& endpoint() const { return at_; }

 private:
  RedisConnection(redisContext* ctx, RedisEndpoint at) : ctx_(ctx), at_(std::move(at)) {}
  Status Fail(const char* what);

  redisContext* ctx_;
  RedisEndpoint at_;
  bool broken_ = false;
  bool timed_out_ = false;
};

}  // namespace kvforge::kvredis
