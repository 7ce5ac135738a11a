// kvredis/cluster_slots.h — Redis Cluster key routing: a key's hash slot (CRC16 of its hash tag,
// mod 16384), the slot -> master map read from CLUSTER SLOTS, and MOVED/ASK redirections.
// Plain data and pure functions; the client (redis_client.h) does the I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kvforge/status.h"
#include "kvredis/redis_reply.h"
#include "kvredis/redis_url.h"

namespace kvforge::kvredis {

inline constexpr int kClusterSlots = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as Redis Cluster uses.
uint16_t Crc16(std::string_view bytes);
// The part of `key` that is hashed: the text between the first '{' and the next '}' when that is
// not empty, else the whole key.
std::string_view HashTag(std::string_view key);
int KeySlot(std::string_view key);

struct SlotRange {
  int first = 0;
  int last = 0;  // inclusive
  RedisEndpoint master;
};

class SlotMap {
 public:
  SlotMap() = default;
  // From a CLUSTER SLOTS reply; `asked` is the node that gave it (for entries with no host).
  static Result<SlotMap> FromClusterSlots(const RedisReply& reply, const RedisEndpoint& asked);
  // The master serving `slot`; nullopt when no node covers it.
  std::optional<RedisEndpoint> MasterOf(int slot) const;
  // A slot now served by `at` (what a MOVED says).
  void Assign(int slot, const RedisEndpoint& at);
  std::vector<RedisEndpoint> Masters() const;
  bool empty() const { return ranges_.empty(); }

 private:
  std::vector<SlotRange> ranges_;  // sorted by first, disjoint
};

struct Redirect {
  bool ask = false;  // ASK: this one command, after ASKING; MOVED: the slot moved for good
  int slot = 0;
  RedisEndpoint to;
};
// A MOVED or ASK error reply, parsed (an empty host: the node that replied); nullopt for any
// other reply.
std::optional<Redirect> ParseRedirect(const RedisReply& reply);

}  // namespace kvforge::kvredis
