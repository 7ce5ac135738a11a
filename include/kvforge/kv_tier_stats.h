// kvforge/kv_tier_stats.h — what each KV offload tier (docs/kv_cache.md, "Tiers") reports: the
// engine's stats, /metrics and `kvforge bench` read these. Counters since start.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace kvforge {

// Upper bounds of the tier latency histogram buckets, seconds (the last bucket is +Inf).
inline constexpr std::array<double, 8> kKvTierLatencyBounds = {1e-4, 5e-4, 1e-3, 5e-3,
                                                               1e-2, 5e-2, 0.1,  0.5};

struct KvTierLatency {
  std::array<int64_t, kKvTierLatencyBounds.size() + 1> buckets{};  // counts; last: > bounds
  double sum_seconds = 0;
  int64_t count = 0;
  void Add(double seconds) {
    size_t i = 0;
    while (i < kKvTierLatencyBounds.size() && seconds > kKvTierLatencyBounds[i]) ++i;
    ++buckets[i];
    sum_seconds += seconds;
    ++count;
  }
};

struct KvTierStats {
  std::string name;  // "ram", "disk", "redis"
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  int64_t chunks = 0;      // chunks held now
  int64_t hits = 0;        // lookups that returned a chunk
  int64_t misses = 0;      // lookups that found nothing
  int64_t puts = 0;        // chunks stored
  int64_t evictions = 0;   // chunks dropped for capacity
  int64_t errors = 0;      // failed reads/writes and corrupt or foreign chunks (each a miss)
  uint64_t bytes_in = 0;   // bytes written to the tier
  uint64_t bytes_out = 0;  // bytes read from it
  KvTierLatency get_latency;
  KvTierLatency put_latency;
};

}  // namespace kvforge
