// kvstore/disk_tier.cc — the local-disk tier: one checksummed record file per chunk.
//
// Layout: <dir>/<fingerprint hex>/<key a><key b>.kvc. Records of another model or format live in
// another subdirectory and are never read. The index (key -> size, LRU position; a TierLruIndex,
// kvstore/tier_lru_index.h) is in memory, rebuilt from the directory listing at start; file I/O
// runs outside the index lock, so a read racing an eviction of the same file is a miss, not an
// error that reaches the caller.
#include <algorithm>
#include <chrono>
#include <mutex>

#include "base/strings.h"
#include "kvstore/kv_tier.h"
#include "kvstore/tier_counting.h"
#include "kvstore/tier_files.h"
#include "kvstore/tier_lru_index.h"

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
        index_(capacity),
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
      index_.InsertLeastRecent(key, e.size);  // newest first, as entries are sorted
    }
    // Trimmed to a capacity smaller than last run's; not counted as evictions.
    RemoveFiles(index_.MakeRoom(0));
    SyncHoldingsLocked();  // no lock needed: the tier is not shared yet
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
    // Until the write succeeded the key is not in the index: a Get meanwhile is a plain miss.
    std::vector<TierKey> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index_.Erase(key);
      drop = index_.MakeRoom(record.size());
      stats_.evictions += static_cast<int64_t>(drop.size());
      SyncHoldingsLocked();
    }
    RemoveFiles(drop);
    Status s = files_->WriteAtomic(Path(key), record);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!s.ok()) {
        ++stats_.errors;
        return s;
      }
      // Drops nothing unless another Put filled the room made above while this one wrote.
      drop = index_.Insert(key, record.size());
      stats_.evictions += static_cast<int64_t>(drop.size());
      CountPut(&stats_, record.size(), static_cast<int64_t>(index_.count()), t0);
      SyncHoldingsLocked();
    }
    RemoveFiles(drop);
    return Status::Ok();
  }

  std::optional<std::vector<uint8_t>> Get(const TierKey& key) override {
    const auto t0 = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (index_.Touch(key) == nullptr) {
        ++stats_.misses;
        return std::nullopt;
      }
    }
    Result<std::vector<uint8_t>> r = files_->Read(Path(key));
    std::lock_guard<std::mutex> lock(mu_);
    if (!r.ok()) {
      ++stats_.errors;
      ++stats_.misses;
      index_.Erase(key);  // the file is gone or unreadable: forget it
      SyncHoldingsLocked();
      return std::nullopt;
    }
    CountHit(&stats_, r->size(), t0);
    return std::move(*r);
  }

  bool Contains(const TierKey& key) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return index_.Find(key) != nullptr;
  }
  void Erase(const TierKey& key) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      index_.Erase(key);
      SyncHoldingsLocked();
    }
    (void)files_->Remove(Path(key));
  }

 private:
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
  // The index is the truth for what is held; CountPut's own used_bytes addition is overwritten.
  void SyncHoldingsLocked() {
    stats_.used_bytes = index_.used_bytes();
    stats_.chunks = static_cast<int64_t>(index_.count());
  }
  // Deletes dropped records' files; called without the lock (file I/O). A file already gone is
  // no error: the index has forgotten it either way.
  void RemoveFiles(const std::vector<TierKey>& keys) {
    for (const TierKey& k : keys) (void)files_->Remove(Path(k));
  }

  TierLruIndex index_;  // key -> file size, by recency; guarded by mu_
  const std::string dir_;
  const uint64_t fingerprint_;
  std::shared_ptr<TierFiles> files_;
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
