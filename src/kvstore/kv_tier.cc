#include "kvstore/kv_tier.h"

#include <chrono>
#include <mutex>

#include "base/strings.h"
#include "kvstore/tier_counting.h"
#include "kvstore/tier_lru_index.h"

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

// Records in host memory, held in the LRU index's payloads; `used` counts record bytes.
class RamTier final : public CountingTier {
 public:
  explicit RamTier(uint64_t capacity) : CountingTier("ram", capacity), index_(capacity) {}

  Status Put(const TierKey& key, const std::vector<uint8_t>& record) override {
    const auto t0 = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    if (record.size() > stats_.capacity_bytes) {
      ++stats_.errors;
      return Status::ResourceExhausted("ram tier: record larger than the tier");
    }
    // The dropped records' bytes go with their index entries: nothing else to delete.
    stats_.evictions += static_cast<int64_t>(index_.Insert(key, record.size(), record).size());
    CountPut(&stats_, record.size(), static_cast<int64_t>(index_.count()), t0);
    SyncHoldingsLocked();
    return Status::Ok();
  }

  std::optional<std::vector<uint8_t>> Get(const TierKey& key) override {
    const auto t0 = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    const TierLruIndex::Entry* e = index_.Touch(key);
    if (e == nullptr) {
      ++stats_.misses;
      return std::nullopt;
    }
    std::vector<uint8_t> out = e->payload;
    CountHit(&stats_, e->payload.size(), t0);
    return out;
  }

  bool Contains(const TierKey& key) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return index_.Find(key) != nullptr;
  }
  void Erase(const TierKey& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    index_.Erase(key);
    SyncHoldingsLocked();
  }

 private:
  // The index is the truth for what is held; CountPut's own used_bytes addition is overwritten.
  void SyncHoldingsLocked() {
    stats_.used_bytes = index_.used_bytes();
    stats_.chunks = static_cast<int64_t>(index_.count());
  }

  TierLruIndex index_;  // guarded by mu_
};

}  // namespace

std::unique_ptr<KvTier> MakeRamTier(uint64_t capacity_bytes) {
  return std::make_unique<RamTier>(capacity_bytes);
}

}  // namespace kvforge::kvstore
