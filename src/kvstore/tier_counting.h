// kvstore/tier_counting.h — the counters every tier keeps the same way (kvforge/kv_tier_stats.h),
// so the RAM, disk and Redis tiers count puts, hits, misses and errors identically: a base class
// holding the stats and their lock, and the put/hit bookkeeping (callers hold the lock).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "kvforge/kv_tier_stats.h"
#include "kvstore/kv_tier.h"

namespace kvforge::kvstore {

inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A record of `bytes` stored, started at t0; `chunks`: records held now.
inline void CountPut(KvTierStats* s, uint64_t bytes, int64_t chunks,
                     std::chrono::steady_clock::time_point t0) {
  s->used_bytes += bytes;
  s->chunks = chunks;
  ++s->puts;
  s->bytes_in += bytes;
  s->put_latency.Add(SecondsSince(t0));
}

// A record of `bytes` returned, looked up from t0.
inline void CountHit(KvTierStats* s, uint64_t bytes, std::chrono::steady_clock::time_point t0) {
  ++s->hits;
  s->bytes_out += bytes;
  s->get_latency.Add(SecondsSince(t0));
}

// A tier's name, stats and the lock guarding them (and whatever else the tier guards with it).
class CountingTier : public KvTier {
 public:
  CountingTier(std::string name, uint64_t capacity_bytes) {
    stats_.name = std::move(name);
    stats_.capacity_bytes = capacity_bytes;
  }
  const std::string& name() const override { return stats_.name; }
  KvTierStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void CountCorrupt() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.errors;
  }
  void CountMiss() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
  }

 protected:
  mutable std::mutex mu_;
  // Mutable: a remote tier's const lookups (Contains) count their failures.
  mutable KvTierStats stats_;
};

}  // namespace kvforge::kvstore
