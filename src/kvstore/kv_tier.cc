#include "kvstore/kv_tier.h"

#include <chrono>
#include <list>
#include <mutex>
#include <unordered_map>

#include "base/strings.h"
#include "kvstore/tier_counting.h"

namespace kvforge::kvstore {

std::string TierKey::Hex() const {
  return base::StrFormat("%016llx%016llx%016llx", (unsigned long long)fingerprint,
                         (unsigned long long)a, (unsigned long long)b);
}

size_t KvTier::ContainsAny(std::span<const TierKey> keys) const {
  for (size_t i = 0; i < keys.size(); ++i)
    if (Contains(keys[i])) return i;
  return keys.size();
}

std::string KvTier::Describe() const {
  const KvTierStats t = stats();
  return base::StrFormat("%s %.1f MiB, %lld chunks held", t.name.c_str(),
                         static_cast<double>(t.capacity_bytes) / (1 << 20), (long long)t.chunks);
}

namespace {

// Records in host memory with an LRU list; `used` counts record bytes.
class RamTier final : public CountingTier {
 public:
  explicit RamTier(uint64_t capacity) : CountingTier("ram", capacity) {}

  Status Put(const TierKey& key, const std::vector<uint8_t>& record) override {
    const auto t0 = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    if (record.size() > stats_.capacity_bytes) {
      ++stats_.errors;
      return Status::ResourceExhausted("ram tier: record larger than the tier");
    }
    EraseLocked(key);
    while (stats_.used_bytes + record.size() > stats_.capacity_bytes && !lru_.empty()) {
      EraseLocked(lru_.back());
      ++stats_.evictions;
    }
    lru_.push_front(key);
    map_[key] = Entry{record, lru_.begin()};
    CountPut(&stats_, record.size(), static_cast<int64_t>(map_.size()), t0);
    return Status::Ok();
  }

  std::optional<std::vector<uint8_t>> Get(const TierKey& key) override {
    const auto t0 = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) {
      ++stats_.misses;
      return std::nullopt;
    }
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    std::vector<uint8_t> out = it->second.record;
    CountHit(&stats_, it->second.record.size(), t0);
    return out;
  }

  bool Contains(const TierKey& key) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.count(key) != 0;
  }
  void Erase(const TierKey& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    EraseLocked(key);
  }

 private:
  struct Entry {
    std::vector<uint8_t> record;
    std::list<TierKey>::iterator lru;
  };
  void EraseLocked(const TierKey& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return;
    stats_.used_bytes -= it->second.record.size();
    lru_.erase(it->second.lru);
    map_.erase(it);
    stats_.chunks = static_cast<int64_t>(map_.size());
  }

  std::list<TierKey> lru_;  // most recent first; guarded by mu_
  std::unordered_map<TierKey, Entry, TierKeyHash> map_;
};

}  // namespace

std::unique_ptr<KvTier> MakeRamTier(uint64_t capacity_bytes) {
  return std::make_unique<RamTier>(capacity_bytes);
}

}  // namespace kvforge::kvstore
