// kvstore/disk_tier.cc — the local-disk tier: one checksummed record file per chunk.
//
// Layout: <dir>/<fingerprint hex>/<key a><key b>.kvc. Records of another model or format live in
// another subdirectory and are never read. The index (key -> size, LRU position) is in memory,
// rebuilt from the directory listing at start; file I/O runs outside the index lock, so a read
// racing an eviction of the same file is a miss, not an error that reaches the caller.
#include <algorithm>
#include <chrono>
#include <list>
#include <mutex>
#include <unordered_map>

#include "base/strings.h"
#include "kvstore/kv_tier.h"
#include "kvstore/tier_counting.h"
#include "kvstore/tier_files.h"

namespace kvforge::kvstore {
namespace {

using base::StrFormat;

constexpr const char* kSuffix = ".kvc";

bool ParseHex64(std::string_view s, uint64_t* out) {
  if (s.size() != 16) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else
      return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

class DiskTier final : public CountingTier {
 public:
  DiskTier(std::string dir, uint64_t capacity, uint64_t fingerprint,
           std::shared_ptr<TierFiles> files)
      : CountingTier("disk", capacity),
        dir_(std::move(dir)),
        fingerprint_(fingerprint),
        files_(std::move(files)) {}

  Status Open() {
    KVF_RETURN_IF_ERROR(files_->MakeDirs(dir_));
    KVF_ASSIGN_OR_RETURN(std::vector<TierFileEntry> entries, files_->List(dir_));
    std::sort(entries.begin(), entries.end(), [](const TierFileEntry& x, const TierFileEntry& y) {
      return x.mtime_ns > y.mtime_ns;
    });
    for (const TierFileEntry& e : entries) {
      TierKey key;
      if (e.name.find(".tmp.") != std::string::npos) {
        (void)files_->Remove(dir_ + "/" + e.name);  // a write interrupted by a crash
        continue;
      }
      if (!ParseName(e.name, &key)) continue;
      lru_.push_back(key);  // newest first, as entries are sorted
      map_[key] = Entry{e.size, std::prev(lru_.end())};
      stats_.used_bytes += e.size;
    }
    std::vector<TierKey> drop;
    while (stats_.used_bytes > stats_.capacity_bytes && !lru_.empty()) {
      drop.push_back(lru_.back());
      EraseLocked(lru_.back());
    }
    for (const TierKey& k : drop) (void)files_->Remove(Path(k));
    stats_.chunks = static_cast<int64_t>(map_.size());
    return Status::Ok();
  }

  Status Put(const TierKey& key, const std::vector<uint8_t>& record) override {
    const auto t0 = std::chrono::steady_clock::now();
    if (record.size() > stats_.capacity_bytes) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.errors;
      return Status::ResourceExhausted("disk tier: record larger than the tier");
    }
    // Make room first, so the directory never holds more than the capacity.
    std::vector<TierKey> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      EraseLocked(key);
      while (stats_.used_bytes + record.size() > stats_.capacity_bytes && !lru_.empty()) {
        drop.push_back(lru_.back());
        EraseLocked(lru_.back());
        ++stats_.evictions;
      }
    }
    for (const TierKey& k : drop) (void)files_->Remove(Path(k));
    Status s = files_->WriteAtomic(Path(key), record);
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok()) {
      ++stats_.errors;
      return s;
    }
    lru_.push_front(key);
    map_[key] = Entry{record.size(), lru_.begin()};
    CountPut(&stats_, record.size(), static_cast<int64_t>(map_.size()), t0);
    return Status::Ok();
  }

  std::optional<std::vector<uint8_t>> Get(const TierKey& key) override {
    const auto t0 = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      if (it == map_.end()) {
        ++stats_.misses;
        return std::nullopt;
      }
      lru_.splice(lru_.begin(), lru_, it->second.lru);
    }
    Result<std::vector<uint8_t>> r = files_->Read(Path(key));
    std::lock_guard<std::mutex> lock(mu_);
    if (!r.ok()) {
      ++stats_.errors;
      ++stats_.misses;
      EraseLocked(key);  // the file is gone or unreadable: forget it
      return std::nullopt;
    }
    CountHit(&stats_, r->size(), t0);
    return std::move(*r);
  }

  bool Contains(const TierKey& key) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.count(key) != 0;
  }
  void Erase(const TierKey& key) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      EraseLocked(key);
    }
    (void)files_->Remove(Path(key));
  }

 private:
  struct Entry {
    uint64_t size = 0;
    std::list<TierKey>::iterator lru;
  };

  std::string Path(const TierKey& k) const {
    return StrFormat("%s/%016llx%016llx%s", dir_.c_str(), (unsigned long long)k.a,
                     (unsigned long long)k.b, kSuffix);
  }
  bool ParseName(const std::string& name, TierKey* key) const {
    const size_t n = name.size();
    if (n != 32 + 4 || name.compare(32, 4, kSuffix) != 0) return false;
    key->fingerprint = fingerprint_;
    return ParseHex64(std::string_view(name).substr(0, 16), &key->a) &&
           ParseHex64(std::string_view(name).substr(16, 16), &key->b);
  }
  void EraseLocked(const TierKey& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return;
    stats_.used_bytes -= it->second.size;
    lru_.erase(it->second.lru);
    map_.erase(it);
    stats_.chunks = static_cast<int64_t>(map_.size());
  }

  const std::string dir_;
  const uint64_t fingerprint_;
  std::shared_ptr<TierFiles> files_;
  std::list<TierKey> lru_;  // most recent first; guarded by mu_
  std::unordered_map<TierKey, Entry, TierKeyHash> map_;
};

}  // namespace

Result<std::unique_ptr<KvTier>> MakeDiskTier(const std::string& dir, uint64_t capacity_bytes,
                                             uint64_t fingerprint,
                                             std::shared_ptr<TierFiles> files) {
  if (dir.empty()) return Status::InvalidArgument("disk tier: empty directory");
  if (!files) files = MakePosixTierFiles();
  auto tier = std::make_unique<DiskTier>(
      StrFormat("%s/%016llx", dir.c_str(), (unsigned long long)fingerprint), capacity_bytes,
      fingerprint, std::move(files));
  KVF_RETURN_IF_ERROR(tier->Open().WithContext("disk tier " + dir));
  return std::unique_ptr<KvTier>(std::move(tier));
}

}  // namespace kvforge::kvstore
