#include "kvstore/tier_lru_index.h"

#include <iterator>
#include <utility>

namespace kvforge::kvstore {

const TierLruIndex::Entry* TierLruIndex::Find(const TierKey& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second.entry;
}

const TierLruIndex::Entry* TierLruIndex::Touch(const TierKey& key) {
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  // splice keeps the node, so the iterator held in the slot stays valid.
  lru_.splice(lru_.begin(), lru_, it->second.pos);
  return &it->second.entry;
}

std::vector<TierKey> TierLruIndex::Insert(const TierKey& key, uint64_t size,
                                          std::vector<uint8_t> payload) {
  // The old entry goes first: its bytes make room for the new one and it is no eviction.
  Erase(key);
  std::vector<TierKey> dropped = MakeRoom(size);
  lru_.push_front(key);
  map_[key] = Slot{Entry{size, std::move(payload)}, lru_.begin()};
  used_ += size;
  return dropped;
}

void TierLruIndex::InsertLeastRecent(const TierKey& key, uint64_t size) {
  Erase(key);
  lru_.push_back(key);
  map_[key] = Slot{Entry{size, {}}, std::prev(lru_.end())};
  used_ += size;
}

std::vector<TierKey> TierLruIndex::MakeRoom(uint64_t size) {
  std::vector<TierKey> dropped;
  while (used_ + size > capacity_ && !lru_.empty()) {
    dropped.push_back(lru_.back());
    Erase(dropped.back());  // a copy: Erase frees the list node lru_.back() refers to
  }
  return dropped;
}

bool TierLruIndex::Erase(const TierKey& key) {
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  used_ -= it->second.entry.size;
  lru_.erase(it->second.pos);
  map_.erase(it);
  return true;
}

std::vector<TierKey> TierLruIndex::KeysMostRecentFirst() const {
  return std::vector<TierKey>(lru_.begin(), lru_.end());
}

}  // namespace kvforge::kvstore
