#include "kvredis/redis_client.h"

#include <algorithm>

namespace kvforge::kvredis {
namespace {

constexpr int kMaxRedirects = 5;

}  // namespace

Result<std::unique_ptr<RedisClient>> RedisClient::Connect(const RedisUrl& url,
                                                          const RedisClientOptions& options) {
  if (url.seeds.empty()) return Status::InvalidArgument("redis: no server given");
  // hiredis waits forever on a zero time-out: every wait here must be bounded.
  if (options.timeout_ms <= 0)
    return Status::InvalidArgument("redis: the time-out must be positive");
  RedisAuth auth{url.user, url.password, url.db};
  std::unique_ptr<RedisClient> c(new RedisClient(auth, options));
  c->seeds_ = url.seeds;
  Status last = Status::Unavailable("redis: no seed answered");
  for (const RedisEndpoint& seed : url.seeds) {
    const RedisArgs probe = {"CLUSTER", "SLOTS"};
    Result<std::vector<RedisReply>> r = c->RunOnNode(seed, std::span<const RedisArgs>(&probe, 1));
    if (!r.ok()) {
      last = r.error();
      if (last.code() == StatusCode::kInvalidArgument) return last;  // AUTH/SELECT refused
      continue;
    }
    const RedisReply& reply = r->front();
    if (reply.is_error() && reply.str.find("cluster support disabled") == std::string::npos) {
      // LOADING, NOPERM, MASTERDOWN...: this node cannot say now; another seed may.
      last = Status::Unavailable("redis " + seed.ToString() + ": CLUSTER SLOTS: " + reply.str);
      continue;
    }
    if (reply.is_error()) {
      // "ERR This instance has cluster support disabled": one server.
      if (url.seeds.size() > 1)
        return Status::InvalidArgument("redis: several hosts given but " + seed.ToString() +
                                       " is not a cluster node (" + reply.str + ")");
      c->seeds_ = {seed};
      return c;
    }
    if (url.db != 0) return Status::InvalidArgument("redis: a cluster has only database 0");
    KVF_ASSIGN_OR_RETURN(SlotMap map, SlotMap::FromClusterSlots(reply, seed));
    if (map.empty())
      return Status::Unavailable("redis cluster at " + seed.ToString() + " serves no slots yet");
    c->cluster_ = true;
    c->slots_ = std::move(map);
    return c;
  }
  return last;
}

std::string RedisClient::Describe() const {
  if (!cluster_) return "redis " + seeds_.front().ToString();
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<RedisEndpoint> masters = slots_.Masters();
  std::string out = "redis cluster, " + std::to_string(masters.size()) + " masters:";
  for (const RedisEndpoint& m : masters) out += " " + m.ToString();
  return out;
}

Result<std::unique_ptr<RedisConnection>> RedisClient::Acquire(const RedisEndpoint& at, bool* reused,
                                                              bool* skipped) {
  *reused = false;
  *skipped = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Node& n = nodes_[at.ToString()];
    if (Clock::now() < n.down_until) {
      *skipped = true;
      return Status::Unavailable("redis " + at.ToString() + ": skipped after a failure");
    }
    if (!n.idle.empty()) {
      std::unique_ptr<RedisConnection> c = std::move(n.idle.back());
      n.idle.pop_back();
      *reused = true;
      return c;
    }
  }
  return RedisConnection::Open(at, auth_, options_.timeout_ms);  // outside the lock
}

void RedisClient::Release(std::unique_ptr<RedisConnection> c) {
  if (c->broken()) return;
  std::lock_guard<std::mutex> lock(mu_);
  Node& n = nodes_[c->endpoint().ToString()];
  if (n.idle.size() < options_.max_idle_per_node) n.idle.push_back(std::move(c));
}

void RedisClient::MarkDown(const RedisEndpoint& at) {
  std::lock_guard<std::mutex> lock(mu_);
  Node& n = nodes_[at.ToString()];
  n.idle.clear();  // connections to a failed server are suspect
  n.failures = std::min(n.failures + 1, 5);
  n.down_until =
      Clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(options_.retry_after_ms) << (n.failures - 1));
}

void RedisClient::MarkUp(const RedisEndpoint& at) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_[at.ToString()].failures = 0;
}

Result<std::vector<RedisReply>> RedisClient::RunOnNode(const RedisEndpoint& at,
                                                       std::span<const RedisArgs> commands) {
  for (int attempt = 0;; ++attempt) {
    bool reused = false, skipped = false;
    Result<std::unique_ptr<RedisConnection>> c = Acquire(at, &reused, &skipped);
    if (!c.ok()) {
      // A refused connection marks the node down; an AUTH/SELECT refusal is the caller's error.
      if (c.error().code() == StatusCode::kUnavailable && !skipped) MarkDown(at);
      return c.error();
    }
    Result<std::vector<RedisReply>> r = (*c)->Pipeline(commands);
    if (r.ok()) {
      Release(std::move(*c));
      MarkUp(at);
      return r;
    }
    // A pooled connection whose server restarted fails at once: one retry on a fresh one (the
    // other pooled ones are as stale, so they go too). Commands here are idempotent (GET, SET,
    // EXISTS, DEL), so a resend is harmless. A time-out is not retried (it would double the wait).
    if (reused && !(*c)->timed_out() && attempt == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      nodes_[at.ToString()].idle.clear();
      continue;
    }
    MarkDown(at);
    return r.error();
  }
}

Result<RedisEndpoint> RedisClient::NodeFor(std::string_view key) {
  if (!cluster_) return seeds_.front();
  const int slot = KeySlot(key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::optional<RedisEndpoint> m = slots_.MasterOf(slot)) return *m;
  }
  KVF_RETURN_IF_ERROR(RefreshSlots());
  std::lock_guard<std::mutex> lock(mu_);
  if (std::optional<RedisEndpoint> m = slots_.MasterOf(slot)) return *m;
  return Status::Unavailable("redis cluster: no master serves slot " + std::to_string(slot));
}

Status RedisClient::RefreshSlotsFrom(const RedisEndpoint& at) {
  const RedisArgs probe = {"CLUSTER", "SLOTS"};
  KVF_ASSIGN_OR_RETURN(std::vector<RedisReply> r,
                       RunOnNode(at, std::span<const RedisArgs>(&probe, 1)));
  if (r.front().is_error())
    return Status::Unavailable("redis " + at.ToString() + ": CLUSTER SLOTS: " + r.front().str);
  KVF_ASSIGN_OR_RETURN(SlotMap map, SlotMap::FromClusterSlots(r.front(), at));
  std::lock_guard<std::mutex> lock(mu_);
  slots_ = std::move(map);
  return Status::Ok();
}

Status RedisClient::RefreshSlots() {
  if (!cluster_) return Status::Ok();
  std::vector<RedisEndpoint> ask;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ask = slots_.Masters();
  }
  for (const RedisEndpoint& s : seeds_)
    if (std::find(ask.begin(), ask.end(), s) == ask.end()) ask.push_back(s);
  Status last = Status::Unavailable("redis cluster: no node to ask for the slot map");
  for (const RedisEndpoint& at : ask) {
    last = RefreshSlotsFrom(at);
    if (last.ok()) return last;
  }
  return last;
}

Result<RedisReply> RedisClient::FollowRedirects(const KeyedCommand& cmd, RedisReply reply,
                                                RedisEndpoint from) {
  for (int hop = 0; hop < kMaxRedirects; ++hop) {
    std::optional<Redirect> r = ParseRedirect(reply);
    if (!r) return reply;
    if (r->to.host.empty()) r->to.host = from.host;
    from = r->to;
    if (r->ask) {
      // The slot is migrating: this key is at the target, for this one command.
      const RedisArgs pair[2] = {RedisArgs{"ASKING"}, cmd.args};
      KVF_ASSIGN_OR_RETURN(std::vector<RedisReply> got, RunOnNode(r->to, pair));
      reply = std::move(got[1]);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      slots_.Assign(r->slot, r->to);
    }
    KVF_ASSIGN_OR_RETURN(std::vector<RedisReply> got,
                         RunOnNode(r->to, std::span<const RedisArgs>(&cmd.args, 1)));
    reply = std::move(got.front());
  }
  if (ParseRedirect(reply))
    return Status::Unavailable("redis cluster: key still redirected after " +
                               std::to_string(kMaxRedirects) + " hops");
  return reply;
}

Result<std::vector<RedisReply>> RedisClient::Run(std::span<const KeyedCommand> commands) {
  // Group the commands by node, keeping each group in order.
  std::map<std::string, std::pair<RedisEndpoint, std::vector<size_t>>> groups;
  for (size_t i = 0; i < commands.size(); ++i) {
    KVF_ASSIGN_OR_RETURN(RedisEndpoint at, NodeFor(commands[i].key));
    auto& g = groups[at.ToString()];
    g.first = at;
    g.second.push_back(i);
  }
  std::vector<RedisReply> out(commands.size());
  std::vector<RedisEndpoint> ran_on(commands.size());
  bool moved = false;
  for (auto& [name, group] : groups) {
    for (size_t i : group.second) ran_on[i] = group.first;
    std::vector<RedisArgs> batch;
    batch.reserve(group.second.size());
    for (size_t i : group.second) batch.push_back(commands[i].args);
    KVF_ASSIGN_OR_RETURN(std::vector<RedisReply> got, RunOnNode(group.first, batch));
    for (size_t k = 0; k < group.second.size(); ++k) out[group.second[k]] = std::move(got[k]);
  }
  for (size_t i = 0; i < commands.size(); ++i) {
    const std::optional<Redirect> r = ParseRedirect(out[i]);
    if (!r) continue;
    moved = moved || !r->ask;
    KVF_ASSIGN_OR_RETURN(out[i], FollowRedirects(commands[i], std::move(out[i]), ran_on[i]));
  }
  // A MOVED means the map is stale beyond that one slot, most likely: read it again.
  if (moved) (void)RefreshSlots();
  return out;
}

Result<RedisReply> RedisClient::Run(std::string_view key, RedisArgs args) {
  const KeyedCommand one{key, std::move(args)};
  KVF_ASSIGN_OR_RETURN(std::vector<RedisReply> r, Run(std::span<const KeyedCommand>(&one, 1)));
  return std::move(r.front());
}

Result<RedisReply> RedisClient::RunOnAny(const RedisArgs& args) {
  RedisEndpoint at = seeds_.front();
  if (cluster_) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::vector<RedisEndpoint> masters = slots_.Masters();
    if (!masters.empty()) at = masters.front();
  }
  KVF_ASSIGN_OR_RETURN(std::vector<RedisReply> r,
                       RunOnNode(at, std::span<const RedisArgs>(&args, 1)));
  return std::move(r.front());
}

}  // namespace kvforge::kvredis
