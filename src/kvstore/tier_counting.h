// kvstore/tier_counting.h — the counters every tier keeps the same way (kvforge/kv_tier_stats.h),
// so the RAM and disk tiers (and later Redis) count puts and hits identically. Callers hold
// their tier's lock.
#pragma once

#include <chrono>
#include <cstdint>

#include "kvforge/kv_tier_stats.h"

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

}  // namespace kvforge::kvstore
