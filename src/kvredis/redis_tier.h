// kvredis/redis_tier.h — the shared KV offload tier: one Redis value per chunk record, so several
// engine instances (on one machine or many) reuse each other's computed prefixes.
//
// Keys are "kvforge:kv:{<fingerprint><a><b>}" (kvstore::TierKey::Hex); the braces are the hash
// tag, so every key of one record lands on one cluster node. Capacity and LRU belong to the
// server, which alone sees every instance's traffic: run it with maxmemory and an allkeys-lru
// (or allkeys-lfu) policy; the tier warns at start when the policy would refuse writes instead.
// A failing or slow server is a miss (bounded by the time-out, then skipped for a back-off),
// never an error that stops a request.
#pragma once

#include <memory>
#include <string>

#include "kvforge/status.h"
#include "kvstore/kv_tier.h"

namespace kvforge::kvredis {

struct RedisTierOptions {
  int timeout_ms = 200;       // connect and each read/write
  int retry_after_ms = 1000;  // back-off after a failure (doubling)
  int64_t ttl_seconds = 0;    // expire records after this long (0: never; the server's LRU)
};

// Connects (kvredis/redis_url.h's URL forms) and checks the server is usable; a server that
// cannot be reached at start is an error, one that fails later a miss.
Result<std::unique_ptr<kvstore::KvTier>> MakeRedisTier(const std::string& url,
                                                       const RedisTierOptions& options);

// The Redis key of a record (exposed for tests and operators).
std::string RedisKeyOf(const kvstore::TierKey& key);

}  // namespace kvforge::kvredis
