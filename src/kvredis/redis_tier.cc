#include "kvredis/redis_tier.h"

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "base/log.h"
#include "base/strings.h"
#include "kvredis/redis_client.h"
#include "kvstore/tier_counting.h"

namespace kvforge::kvredis {

std::string RedisKeyOf(const kvstore::TierKey& key) { return "kvforge:kv:{" + key.Hex() + "}"; }

namespace {

// CONFIG GET name -> its value, or "" when the server does not say (e.g. CONFIG is disabled).
std::string ConfigValue(RedisClient& client, std::string_view name) {
  Result<RedisReply> r = client.RunOnAny({"CONFIG", "GET", name});
  if (!r.ok() || r->type != RedisReply::Type::kArray || r->elements.size() < 2) return "";
  return r->elements[1].str;
}

class RedisTier final : public kvstore::CountingTier {
 public:
  RedisTier(std::unique_ptr<RedisClient> client, const RedisTierOptions& options, uint64_t capacity)
      : CountingTier("redis", capacity),
        client_(std::move(client)),
        ttl_(std::to_string(options.ttl_seconds)),
        use_ttl_(options.ttl_seconds > 0) {}

  Status Put(const kvstore::TierKey& key, const std::vector<uint8_t>& record) override {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string k = RedisKeyOf(key);
    const std::string_view value(reinterpret_cast<const char*>(record.data()), record.size());
    RedisArgs args = {"SET", k, value};
    if (use_ttl_) {
      args.push_back("EX");
      args.push_back(ttl_);
    }
    Result<RedisReply> r = client_->Run(k, std::move(args));
    std::lock_guard<std::mutex> lock(mu_);
    if (!r.ok()) {
      ++stats_.errors;
      return r.error();
    }
    if (r->is_error()) {  // e.g. OOM under maxmemory-policy noeviction
      ++stats_.errors;
      return Status::ResourceExhausted("redis SET: " + r->str);
    }
    kvstore::CountPut(&stats_, record.size(), 0, t0);
    stats_.used_bytes = 0;  // the server's to know (INFO memory), not this instance's
    return Status::Ok();
  }

  std::optional<std::vector<uint8_t>> Get(const kvstore::TierKey& key) override {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string k = RedisKeyOf(key);
    Result<RedisReply> r = client_->Run(k, {"GET", k});
    std::lock_guard<std::mutex> lock(mu_);
    if (!r.ok() || r->is_error()) {
      ++stats_.errors;
      ++stats_.misses;
      if (!r.ok()) KVF_LOG_DEBUG("kv offload: %s", r.error().message().c_str());
      return std::nullopt;
    }
    if (r->type != RedisReply::Type::kString) {
      ++stats_.misses;
      return std::nullopt;
    }
    std::vector<uint8_t> out(r->str.begin(), r->str.end());
    kvstore::CountHit(&stats_, out.size(), t0);
    return out;
  }

  bool Contains(const kvstore::TierKey& key) const override {
    const kvstore::TierKey one[1] = {key};
    return ContainsAny(one) == 0;
  }

  // One round trip for all the keys (EXISTS each, pipelined per node).
  size_t ContainsAny(std::span<const kvstore::TierKey> keys) const override {
    std::vector<std::string> names;
    names.reserve(keys.size());
    for (const kvstore::TierKey& k : keys) names.push_back(RedisKeyOf(k));
    std::vector<KeyedCommand> cmds;
    cmds.reserve(keys.size());
    for (const std::string& n : names) cmds.push_back({n, {"EXISTS", n}});
    Result<std::vector<RedisReply>> r = client_->Run(cmds);
    if (!r.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.errors;
      return keys.size();
    }
    for (size_t i = 0; i < r->size(); ++i)
      if ((*r)[i].type == RedisReply::Type::kInteger && (*r)[i].integer > 0) return i;
    return keys.size();
  }

  void Erase(const kvstore::TierKey& key) override {
    const std::string k = RedisKeyOf(key);
    if (Result<RedisReply> r = client_->Run(k, {"DEL", k}); !r.ok() || r->is_error()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.errors;
    }
  }
  bool remote() const override { return true; }
  std::string Describe() const override {
    std::string out = client_->Describe();
    const uint64_t cap = stats().capacity_bytes;
    out += cap ? base::StrFormat(" (maxmemory %.1f MiB)", static_cast<double>(cap) / (1 << 20))
               : std::string(" (no maxmemory)");
    return out;
  }

 private:
  std::unique_ptr<RedisClient> client_;
  const std::string ttl_;
  const bool use_ttl_;
};

}  // namespace

Result<std::unique_ptr<kvstore::KvTier>> MakeRedisTier(const std::string& url,
                                                       const RedisTierOptions& options) {
  if (options.timeout_ms <= 0) return Status::InvalidArgument("redis time-out must be positive");
  if (options.ttl_seconds < 0) return Status::InvalidArgument("redis ttl must not be negative");
  KVF_ASSIGN_OR_RETURN(RedisUrl parsed, ParseRedisUrl(url));
  RedisClientOptions co;
  co.timeout_ms = options.timeout_ms;
  co.retry_after_ms = options.retry_after_ms;
  KVF_ASSIGN_OR_RETURN(std::unique_ptr<RedisClient> client, RedisClient::Connect(parsed, co));
  KVF_ASSIGN_OR_RETURN(RedisReply pong, client->RunOnAny({"PING"}));
  if (pong.is_error())
    return Status::Unavailable(client->Describe() + " does not answer PING: " + pong.str);
  const std::string maxmemory = ConfigValue(*client, "maxmemory");
  const std::string policy = ConfigValue(*client, "maxmemory-policy");
  if (!maxmemory.empty() && maxmemory != "0" && policy.rfind("allkeys-", 0) != 0 &&
      !(options.ttl_seconds > 0 && policy.rfind("volatile-", 0) == 0))
    KVF_LOG_WARN(
        "kv offload: %s has maxmemory-policy %s: chunk writes fail once it is full (use "
        "allkeys-lru)",
        client->Describe().c_str(), policy.c_str());
  const uint64_t capacity = maxmemory.empty() ? 0 : std::strtoull(maxmemory.c_str(), nullptr, 10);
  return std::unique_ptr<kvstore::KvTier>(
      std::make_unique<RedisTier>(std::move(client), options, capacity));
}

}  // namespace kvforge::kvredis
