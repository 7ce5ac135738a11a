// server/inspector_codec.cc — see inspector_codec.h.
#include "server/inspector_codec.h"

#include <nlohmann/json.hpp>

namespace kvforge::server {
namespace {

using json = nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

char UseLetter(KvBlockUse u) {
  switch (u) {
    case KvBlockUse::kUsed:
      return 'U';
    case KvBlockUse::kShared:
      return 'S';
    case KvBlockUse::kCached:
      return 'C';
    case KvBlockUse::kFree:
      break;
  }
  return 'F';
}

json OrNull(double v) { return v < 0 ? json(nullptr) : json(v); }

json PoolJson(const KvSnapshot& s) {
  int64_t used = 0, shared = 0, cached = 0, free = 0;
  for (const KvBlockInfo& b : s.blocks) {
    used += b.use == KvBlockUse::kUsed;
    shared += b.use == KvBlockUse::kShared;
    cached += b.use == KvBlockUse::kCached;
    free += b.use == KvBlockUse::kFree;
  }
  return {{"num_blocks", s.num_blocks},
          {"block_tokens", s.block_tokens},
          {"bytes_per_block", s.bytes_per_block},
          {"k_dtype", s.k_dtype},
          {"v_dtype", s.v_dtype},
          {"streams", s.num_streams},
          {"used", used},
          {"shared", shared},
          {"cached", cached},
          {"free", free}};
}

json BlocksJson(const KvSnapshot& s) {
  std::string use;
  use.reserve(s.blocks.size());
  // [index, request id, ref count, eviction rank] of every block that is not free.
  json held = json::array();
  for (size_t i = 0; i < s.blocks.size(); ++i) {
    const KvBlockInfo& b = s.blocks[i];
    use.push_back(UseLetter(b.use));
    if (b.use != KvBlockUse::kFree) held.push_back({i, b.request_id, b.ref_count, b.evict_rank});
  }
  return {{"use", use}, {"held", std::move(held)}};
}

json PrefixJson(const KvSnapshot& s, const EngineStats& st) {
  // Rows, not objects: the columns are named once ("entry_columns").
  json entries = json::array();
  for (const KvPrefixEntry& e : s.prefix_entries)
    entries.push_back({e.id, e.parent, e.tokens, e.blocks, e.hits, e.locked, e.last_use});
  const double rate = st.prefix_cache_query_tokens > 0
                          ? static_cast<double>(st.prefix_cache_hit_tokens) /
                                static_cast<double>(st.prefix_cache_query_tokens)
                          : 0.0;
  return {{"mode", s.prefix_mode},
          {"queries", st.prefix_cache_queries},
          {"query_tokens", st.prefix_cache_query_tokens},
          {"hit_tokens", st.prefix_cache_hit_tokens},
          {"hit_rate", rate},
          {"cached_blocks", st.prefix_cache_blocks},
          {"evicted_blocks", st.prefix_cache_evicted_blocks},
          {"entry_columns", {"id", "parent", "tokens", "blocks", "hits", "locked", "last_use"}},
          {"entries", std::move(entries)},
          {"truncated", s.prefix_truncated}};
}

json RequestsJson(const KvSnapshot& s) {
  json out = json::array();
  for (const KvRequestInfo& r : s.requests)
    out.push_back({{"id", r.id},
                   {"state", r.state},
                   {"prompt_tokens", r.prompt_tokens},
                   {"generated_tokens", r.generated_tokens},
                   {"cached_tokens", r.cached_tokens},
                   {"seqs", r.num_seqs},
                   {"kv_tokens", r.kv_tokens},
                   {"blocks", r.blocks},
                   {"bytes", r.bytes},
                   {"preemptions", r.preemptions},
                   {"kv_policy", r.kv_policy},
                   {"kv_evicted_tokens", r.kv_evicted_tokens}});
  return out;
}

// The offload tiers below the pool (docs/kv_cache.md#tiers), fastest first; enabled false and no
// tiers without them.
json OffloadJson(const EngineStats& st) {
  json tiers = json::array();
  for (const KvTierStats& t : st.kv_tiers)
    tiers.push_back({{"name", t.name},
                     {"capacity_bytes", t.capacity_bytes},
                     {"used_bytes", t.used_bytes},
                     {"chunks", t.chunks},
                     {"hits", t.hits},
                     {"misses", t.misses},
                     {"puts", t.puts},
                     {"evictions", t.evictions},
                     {"errors", t.errors},
                     {"bytes_in", t.bytes_in},
                     {"bytes_out", t.bytes_out}});
  return {{"enabled", st.kv_offload},
          {"loaded_tokens", st.kv_offload_loaded_tokens},
          {"loaded_chunks", st.kv_offload_loaded_chunks},
          {"stored_chunks", st.kv_offload_stored_chunks},
          {"rejected_chunks", st.kv_offload_rejected_chunks},
          {"dropped_writes", st.kv_offload_dropped_writes},
          {"tiers", std::move(tiers)}};
}

json StatsJson(const EngineStats& st) {
  const double frag = st.reserved_slots > 0 ? 1.0 - static_cast<double>(st.live_tokens) /
                                                        static_cast<double>(st.reserved_slots)
                                            : 0.0;
  return {{"running", st.num_running},
          {"waiting", st.num_waiting},
          {"swapped", st.num_swapped},
          {"preemptions", st.num_preemptions},
          {"kv_usage", st.kv_usage},
          {"kv_bytes", st.kv_bytes},
          {"live_tokens", st.live_tokens},
          {"reserved_slots", st.reserved_slots},
          {"fragmentation", frag},
          {"prompt_tokens_total", st.prompt_tokens_total},
          {"generation_tokens_total", st.generation_tokens_total},
          {"steps", st.steps},
          {"kv_compactions", st.kv_compactions},
          {"spec_method", st.spec_method},
          {"spec_num_drafts", st.spec_num_drafts},
          {"spec_draft_tokens", st.spec_draft_tokens},
          {"spec_accepted_tokens", st.spec_accepted_tokens},
          {"spec_acceptance_rate",
           st.spec_draft_tokens > 0 ? static_cast<double>(st.spec_accepted_tokens) /
                                          static_cast<double>(st.spec_draft_tokens)
                                    : 0.0},
          {"spec_mean_accepted_per_draft",
           st.spec_num_drafts > 0 ? static_cast<double>(st.spec_accepted_tokens) /
                                        static_cast<double>(st.spec_num_drafts)
                                  : 0.0}};
}

}  // namespace

std::string EncodeKvSnapshot(const KvSnapshot& snap, const EngineStats& stats,
                             const std::string& model_id) {
  return Dump({{"model", model_id},
               {"step", snap.step},
               {"pool", PoolJson(snap)},
               {"blocks", BlocksJson(snap)},
               {"prefix_cache", PrefixJson(snap, stats)},
               {"requests", RequestsJson(snap)},
               {"offload", OffloadJson(stats)},
               {"stats", StatsJson(stats)}});
}

std::string EncodeHistory(const std::vector<StatsSample>& samples, double interval_s) {
  json out = json::array();
  for (const StatsSample& s : samples)
    out.push_back({{"t", s.t_s},
                   {"running", s.running},
                   {"waiting", s.waiting},
                   {"swapped", s.swapped},
                   {"kv_usage", s.kv_usage},
                   {"prompt_tokens_per_s", s.prompt_tokens_per_s},
                   {"generation_tokens_per_s", s.generation_tokens_per_s},
                   {"prefix_hit_rate", OrNull(s.prefix_hit_rate)},
                   {"ttft_p50_s", OrNull(s.ttft_p50_s)},
                   {"ttft_p90_s", OrNull(s.ttft_p90_s)},
                   {"itl_p50_s", OrNull(s.itl_p50_s)},
                   {"itl_p90_s", OrNull(s.itl_p90_s)}});
  return Dump({{"interval_s", interval_s}, {"samples", std::move(out)}});
}

}  // namespace kvforge::server
