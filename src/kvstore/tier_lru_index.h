// kvstore/tier_lru_index.h — the least-recently-used index the local tiers (RAM, disk) keep of
// what they hold: key -> size (and, for the RAM tier, the record itself), ordered by recency,
// within a byte capacity. One copy of the LRU rules, so both tiers evict the same way: a put goes
// to the front, a hit moves to the front, room is made by dropping from the back.
// The index does no I/O; it names the keys it dropped, and the tier deletes what they stand for
// (the disk tier's files).
// Thread-safety: none; the tier guards its index with its own lock (CountingTier::mu_).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "kvstore/kv_tier.h"

namespace kvforge::kvstore {

class TierLruIndex {
 public:
  struct Entry {
    uint64_t size = 0;             // bytes the record takes in the tier
    std::vector<uint8_t> payload;  // [size] record bytes for the RAM tier; empty for the disk tier
  };

  explicit TierLruIndex(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // The entry, without changing its recency (Contains); null when absent.
  const Entry* Find(const TierKey& key) const;
  // A hit: moves the entry to the front and returns it; null when absent.
  const Entry* Touch(const TierKey& key);
  // Stores `key` as the most recent entry, replacing one with the same key (not counted as
  // evicted), after dropping least recent entries until `size` fits. Returns the dropped keys,
  // oldest first. A size above the capacity empties the index and is still stored: the tiers
  // refuse such records before they get here.
  std::vector<TierKey> Insert(const TierKey& key, uint64_t size, std::vector<uint8_t> payload = {});
  // Stores `key` as the least recent entry without evicting (replacing one with the same key):
  // the disk tier's start-up scan, fed newest first, then trims with MakeRoom(0).
  void InsertLeastRecent(const TierKey& key, uint64_t size);
  // Drops least recent entries until `size` more bytes fit (or the index is empty); returns the
  // dropped keys, oldest first. The disk tier makes room before writing the file, so the
  // directory never holds more than the capacity, and inserts once the write succeeded.
  std::vector<TierKey> MakeRoom(uint64_t size);
  // Forgets `key`; whether it was there.
  bool Erase(const TierKey& key);

  // Keys from the most to the least recent (tests, debugging): O(count).
  std::vector<TierKey> KeysMostRecentFirst() const;
  uint64_t used_bytes() const { return used_; }
  uint64_t capacity() const { return capacity_; }
  size_t count() const { return map_.size(); }

 private:
  struct Slot {
    Entry entry;
    std::list<TierKey>::iterator pos;  // into lru_
  };

  const uint64_t capacity_;
  uint64_t used_ = 0;       // sum of the entries' sizes
  std::list<TierKey> lru_;  // most recent first; one node per map_ entry
  std::unordered_map<TierKey, Slot, TierKeyHash> map_;
};

}  // namespace kvforge::kvstore
