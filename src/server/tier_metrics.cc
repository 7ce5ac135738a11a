#include "server/tier_metrics.h"

#include "base/strings.h"

namespace kvforge::server {
namespace {

using base::StrFormat;

void Family(std::string* out, const char* name, const char* type, const char* help) {
  *out += StrFormat("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

template <typename Get>
void PerTier(std::string* out, const EngineStats& s, const char* name, const char* type,
             const char* help, Get get) {
  Family(out, name, type, help);
  for (const KvTierStats& t : s.kv_tiers)
    *out += StrFormat("%s{tier=\"%s\"} %.17g\n", name, t.name.c_str(), get(t));
}

void Histogram(std::string* out, const EngineStats& s, const char* name, const char* help,
               const KvTierLatency KvTierStats::*member) {
  Family(out, name, "histogram", help);
  for (const KvTierStats& t : s.kv_tiers) {
    const KvTierLatency& h = t.*member;
    int64_t cum = 0;
    for (size_t i = 0; i < kKvTierLatencyBounds.size(); ++i) {
      cum += h.buckets[i];
      *out += StrFormat("%s_bucket{tier=\"%s\",le=\"%g\"} %lld\n", name, t.name.c_str(),
                        kKvTierLatencyBounds[i], (long long)cum);
    }
    *out += StrFormat("%s_bucket{tier=\"%s\",le=\"+Inf\"} %lld\n", name, t.name.c_str(),
                      (long long)h.count);
    *out += StrFormat("%s_sum{tier=\"%s\"} %.9g\n%s_count{tier=\"%s\"} %lld\n", name,
                      t.name.c_str(), h.sum_seconds, name, t.name.c_str(), (long long)h.count);
  }
}

}  // namespace

std::string RenderTierMetrics(const EngineStats& s) {
  if (!s.kv_offload) return {};
  std::string out;
  auto total = [&out](const char* name, const char* help, int64_t v) {
    Family(&out, name, "counter", help);
    out += StrFormat("%s %lld\n", name, (long long)v);
  };
  total("kvforge_kv_offload_loaded_tokens_total",
        "Prompt tokens whose KV was loaded from an offload tier instead of computed.",
        s.kv_offload_loaded_tokens);
  total("kvforge_kv_offload_stored_chunks_total", "KV chunks queued for the offload tiers.",
        s.kv_offload_stored_chunks);
  total("kvforge_kv_offload_rejected_chunks_total",
        "Offloaded chunks refused on load (corrupt, foreign or mismatched) and recomputed.",
        s.kv_offload_rejected_chunks);
  total("kvforge_kv_offload_dropped_writes_total",
        "KV chunks not offloaded because the write queue was full.", s.kv_offload_dropped_writes);
  total("kvforge_kv_offload_load_timeouts_total",
        "Requests admitted without their offloaded chunks, still loading at the time-out.",
        s.kv_offload_load_timeouts);
  total("kvforge_kv_offload_prefetches_total",
        "Tier fetches started while their request waited behind others (ready at admission).",
        s.kv_offload_prefetches);
  total("kvforge_kv_offload_load_waits_total",
        "Admissions put off for a step while a request's chunks were loading.",
        s.kv_offload_load_waits);
  Family(&out, "kvforge_kv_offload_deferred_chunks", "gauge",
         "Write-back: computed chunks held in the hot pool, written when it drops them.");
  out += StrFormat("kvforge_kv_offload_deferred_chunks %lld\n",
                   (long long)s.kv_offload_deferred_chunks);
  using T = KvTierStats;
  PerTier(&out, s, "kvforge_kv_tier_hits_total", "counter", "Chunk lookups that found the chunk.",
          [](const T& t) { return static_cast<double>(t.hits); });
  PerTier(&out, s, "kvforge_kv_tier_misses_total", "counter", "Chunk lookups that found nothing.",
          [](const T& t) { return static_cast<double>(t.misses); });
  PerTier(&out, s, "kvforge_kv_tier_errors_total", "counter",
          "Failed reads or writes and refused chunks.",
          [](const T& t) { return static_cast<double>(t.errors); });
  PerTier(&out, s, "kvforge_kv_tier_evictions_total", "counter", "Chunks dropped for capacity.",
          [](const T& t) { return static_cast<double>(t.evictions); });
  PerTier(&out, s, "kvforge_kv_tier_bytes_in_total", "counter", "Bytes written to the tier.",
          [](const T& t) { return static_cast<double>(t.bytes_in); });
  PerTier(&out, s, "kvforge_kv_tier_bytes_out_total", "counter", "Bytes read from the tier.",
          [](const T& t) { return static_cast<double>(t.bytes_out); });
  PerTier(&out, s, "kvforge_kv_tier_used_bytes", "gauge", "Bytes the tier holds.",
          [](const T& t) { return static_cast<double>(t.used_bytes); });
  PerTier(&out, s, "kvforge_kv_tier_capacity_bytes", "gauge", "The tier's capacity.",
          [](const T& t) { return static_cast<double>(t.capacity_bytes); });
  PerTier(&out, s, "kvforge_kv_tier_chunks", "gauge", "Chunks the tier holds.",
          [](const T& t) { return static_cast<double>(t.chunks); });
  Histogram(&out, s, "kvforge_kv_tier_get_seconds", "Time to read one chunk from the tier.",
            &KvTierStats::get_latency);
  Histogram(&out, s, "kvforge_kv_tier_put_seconds", "Time to write one chunk to the tier.",
            &KvTierStats::put_latency);
  return out;
}

}  // namespace kvforge::server
