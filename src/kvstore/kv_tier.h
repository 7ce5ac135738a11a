// kvstore/kv_tier.h — one level of the KV offload hierarchy below the hot block pool.
//
// A tier maps a TierKey to an opaque record (an encoded chunk, kvstore/kv_chunk.h): the RAM tier
// keeps records in host memory, the disk tier one file per record, the Redis tier one value per
// record. Each has its own byte capacity and drops least recently used records to stay within
// it. Tiers know nothing of tokens or blocks; the chain (kvstore/tier_chain.h) decides what goes
// where. A failing tier is a miss, never an error that stops a request: Get returns nullopt and
// counts the error. Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvforge/kv_tier_stats.h"
#include "kvforge/status.h"

namespace kvforge::kvstore {

// The content a record holds: its KV fingerprint (model, layout, dtype, format) and the 128-bit
// chained block key (kvmeta/block_hash.h) of its last block.
struct TierKey {
  uint64_t fingerprint = 0;
  uint64_t a = 0;
  uint64_t b = 0;
  friend bool operator==(const TierKey&, const TierKey&) = default;
  std::string Hex() const;  // 48 hex digits: fingerprint, a, b
};

struct TierKeyHash {
  size_t operator()(const TierKey& k) const {
    return static_cast<size_t>(k.a ^ (k.b * 0x9e3779b97f4a7c15ull) ^ (k.fingerprint >> 7));
  }
};

class KvTier {
 public:
  virtual ~KvTier() = default;
  virtual const std::string& name() const = 0;
  // Stores a record (replacing one with the same key). Records larger than the capacity are
  // refused (ResourceExhausted); I/O failures are IoError. Either way the tier is unchanged.
  virtual Status Put(const TierKey& key, const std::vector<uint8_t>& record) = 0;
  // The record, refreshing its LRU position; nullopt when absent or unreadable.
  virtual std::optional<std::vector<uint8_t>> Get(const TierKey& key) = 0;
  // Whether the tier believes it holds the key (a later Get may still miss).
  virtual bool Contains(const TierKey& key) const = 0;
  // The index of the first of `keys` the tier holds, keys.size() when none: one question for a
  // remote tier (one round trip), a loop over Contains for a local one.
  virtual size_t ContainsAny(std::span<const TierKey> keys) const;
  // Forgets a record (e.g. one that failed verification).
  virtual void Erase(const TierKey& key) = 0;
  virtual KvTierStats stats() const = 0;
  // Counts a record this tier returned that failed verification above it.
  virtual void CountCorrupt() = 0;
  // Counts a lookup the chain answered without asking this tier's Get (the record was not here).
  virtual void CountMiss() = 0;
  // For the start-up log: what the tier is and how big ("ram 64.0 MiB, 12 chunks held").
  virtual std::string Describe() const;
  // Whether a lookup is a network round trip (Redis): the engine thread then asks it only when
  // loading, never when deciding what to store.
  virtual bool remote() const { return false; }
};

// Host memory, `capacity_bytes` of records.
std::unique_ptr<KvTier> MakeRamTier(uint64_t capacity_bytes);

}  // namespace kvforge::kvstore

namespace kvforge::kvstore {
class TierFiles;
// One file per record under `dir`/<fingerprint>/ (the directory is made if missing), at most
// `capacity_bytes` of files. Records left by an earlier run are indexed at start (oldest first
// in LRU order), so a warm directory survives restarts; stale temporary files are removed.
// `files` null: the POSIX file system.
Result<std::unique_ptr<KvTier>> MakeDiskTier(const std::string& dir, uint64_t capacity_bytes,
                                             uint64_t fingerprint,
                                             std::shared_ptr<TierFiles> files = nullptr);
}  // namespace kvforge::kvstore
