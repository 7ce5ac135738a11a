// kvredis/redis_client.h — a small synchronous Redis client over hiredis for one server or a
// Redis Cluster (Debian ships no cluster client library, so routing is done here: a key goes to
// the master of its hash slot, from CLUSTER SLOTS, and MOVED/ASK replies are followed as cluster
// clients do).
//
// Each node has a pool of idle connections, so the engine thread and the offload writer never
// wait on each other's transfers. Every wait is bounded by the time-out. A node that failed is
// skipped (calls fail at once) for a back-off that doubles on each further failure, so a dead or
// stopped server costs one time-out, not one per request; a connection that broke because the
// server restarted is replaced once, transparently. Thread-safety: every method may be called from
// any thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvforge/status.h"
#include "kvredis/cluster_slots.h"
#include "kvredis/redis_connection.h"
#include "kvredis/redis_reply.h"
#include "kvredis/redis_url.h"

namespace kvforge::kvredis {

struct RedisClientOptions {
  int timeout_ms = 200;          // connect, and each read or write
  int retry_after_ms = 1000;     // first back-off after a node fails (then x2, up to 16x)
  size_t max_idle_per_node = 4;  // pooled connections kept per node
};

// A command and the key that decides which cluster node runs it.
struct KeyedCommand {
  std::string_view key;
  RedisArgs args;
};

class RedisClient {
 public:
  // Connects to the first seed that answers and finds out whether it is a cluster node (then reads
  // the slot map). Fails when no seed answers, AUTH or SELECT fails, or a cluster is given db != 0.
  static Result<std::unique_ptr<RedisClient>> Connect(const RedisUrl& url,
                                                      const RedisClientOptions& options);
  bool cluster() const { return cluster_; }
  std::string Describe() const;  // "redis 127.0.0.1:6379" or "redis cluster 3 masters: ..."

  // Runs each command on the node owning its key: one pipeline (one round trip) per node, then
  // any redirections. Replies in order; error replies are replies. Fails when a node needed
  // cannot be reached or the redirections do not settle.
  Result<std::vector<RedisReply>> Run(std::span<const KeyedCommand> commands);
  Result<RedisReply> Run(std::string_view key, RedisArgs args);
  // A command about the server (CONFIG GET, INFO): the single node, or a cluster's first master.
  Result<RedisReply> RunOnAny(const RedisArgs& args);
  // Re-reads the cluster's slot map (no-op for a single node).
  Status RefreshSlots();

 private:
  using Clock = std::chrono::steady_clock;
  struct Node {
    std::vector<std::unique_ptr<RedisConnection>> idle;
    Clock::time_point down_until{};
    int failures = 0;
  };
  RedisClient(RedisAuth auth, RedisClientOptions options)
      : auth_(std::move(auth)), options_(options) {}

  // The commands, pipelined on one node (with one fresh-connection retry when a pooled one broke).
  Result<std::vector<RedisReply>> RunOnNode(const RedisEndpoint& at,
                                            std::span<const RedisArgs> commands);
  // `reused`: the connection came from the pool; `skipped`: the node is in its back-off.
  Result<std::unique_ptr<RedisConnection>> Acquire(const RedisEndpoint& at, bool* reused,
                                                   bool* skipped);
  void Release(std::unique_ptr<RedisConnection> c);
  void MarkDown(const RedisEndpoint& at);
  void MarkUp(const RedisEndpoint& at);
  Result<RedisEndpoint> NodeFor(std::string_view key);
  // Follows MOVED/ASK for one command whose first reply was `reply`, from node `from`.
  Result<RedisReply> FollowRedirects(const KeyedCommand& cmd, RedisReply reply, RedisEndpoint from);
  Status RefreshSlotsFrom(const RedisEndpoint& at);

  const RedisAuth auth_;
  const RedisClientOptions options_;
  bool cluster_ = false;
  std::vector<RedisEndpoint> seeds_;
  mutable std::mutex mu_;
  std::map<std::string, Node> nodes_;  // by "host:port"
  SlotMap slots_;
};

}  // namespace kvforge::kvredis
