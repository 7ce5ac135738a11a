// kvforge/kv_snapshot.h — a point-in-time picture of an engine's KV cache for inspectors (the
// server's web page, GET /v1/kvforge/kv): every block's use, the prefix cache's entries, and the
// requests holding KV. Taken on the engine thread between two steps (AsyncEngine::KvCacheSnapshot),
// so it is consistent: the blocks of the requests listed are the blocks marked used.
// Plain data; a new KV part (a tier, a policy's state) adds a section here and its JSON in the
// server's inspector codec, nothing else.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvforge {

enum class KvBlockUse : uint8_t {
  kFree,    // holds nothing
  kUsed,    // in one live sequence's table
  kShared,  // in two or more live sequences' tables (parallel sampling, beams, prefix hits)
  kCached,  // no live sequence, but the prefix cache keeps its content (reusable on a hit)
};

struct KvBlockInfo {
  KvBlockUse use = KvBlockUse::kFree;
  int32_t ref_count = 0;       // the pool's references (sequences + the radix tree)
  int32_t seq_refs = 0;        // live sequences whose table holds it
  int64_t request_id = 0;      // the first live request holding it (0: none)
  bool prefix_cached = false;  // the prefix cache knows its content (also when in use)
  // Cached blocks in hash mode: 0 for the block the next allocation repurposes, 1 the next, ...
  // (the pool's LRU order); -1 otherwise (radix mode evicts whole leaves by their last use: see
  // KvPrefixEntry::last_use).
  int64_t evict_rank = -1;
};

// A prefix cache entry: a cached block of a hash chain, or a radix tree node (see
// kvmeta::PrefixCacheNode). parent 0: a chain's first block / a top-level node.
struct KvPrefixEntry {
  int64_t id = 0;
  int64_t parent = 0;
  int64_t tokens = 0;
  int32_t blocks = 0;
  int64_t hits = 0;
  bool locked = false;
  uint64_t last_use = 0;  // the cache's logical clock; larger is more recent
};

struct KvRequestInfo {
  int64_t id = 0;
  std::string state;  // "waiting" | "running" | "swapped"
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;  // all sequences
  int64_t cached_tokens = 0;     // prompt tokens found in the prefix cache
  int32_t num_seqs = 0;          // live sequences (n > 1, beams)
  int64_t kv_tokens = 0;         // token slots its sequences hold
  int64_t blocks = 0;            // distinct blocks its sequences hold
  uint64_t bytes = 0;            // blocks x bytes per block
  int64_t preemptions = 0;
  std::string kv_policy;  // "none", "h2o", ...
  int64_t kv_evicted_tokens = 0;
};

struct KvSnapshot {
  int64_t step = 0;  // engine steps so far
  // The pool.
  int32_t block_tokens = 0;
  int64_t num_blocks = 0;
  uint64_t bytes_per_block = 0;     // every layer and stream of one block
  std::string k_dtype, v_dtype;     // e.g. "f16"; the same for a latent (MLA) store
  int32_t num_streams = 2;          // 2: K and V; 1: an MLA latent
  std::vector<KvBlockInfo> blocks;  // [num_blocks], by block index
  // The prefix cache ("off", "hash" or "radix"); entries capped at max_prefix_entries.
  std::string prefix_mode = "off";
  std::vector<KvPrefixEntry> prefix_entries;
  bool prefix_truncated = false;
  // Requests the engine holds, running first.
  std::vector<KvRequestInfo> requests;
};

}  // namespace kvforge
