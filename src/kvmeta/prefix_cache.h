// kvmeta/prefix_cache.h — reuse of computed KV across requests that share a prompt prefix.
//
// Two designs behind one interface (docs/kv_cache.md, "Prefix caching"):
//   * HashPrefixCache (vLLM's automatic prefix caching): every full block is keyed by a chained
//     hash of (parent hash, the block's token ids, the cache salt). Cached blocks whose ref count
//     falls to zero stay in the BlockPool's LRU list and are only repurposed when nothing is free,
//     so the cache costs no capacity. Matching is block-granular.
//   * RadixPrefixCache (SGLang's RadixAttention): a radix tree over token ids whose nodes hold
//     references on the blocks that store their tokens' K/V. Matching is token-granular (a prompt
//     sharing 37 tokens reuses 37: two whole blocks and a 5-token copy of the third), nodes split
//     where prompts diverge, nodes on a running sequence's path are locked, and unlocked leaves
//     are evicted in LRU order when the pool runs short.
// Bookkeeping only: block ids and token ids, no bytes (the caller copies a partial block's slots).
// Thread-safety: none (engine thread only, like the BlockPool it works on).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kvforge/status.h"
#include "kvmeta/block_pool.h"
#include "kvmeta/ids.h"

namespace kvforge::kvmeta {

// The cached prefix of a token sequence. Tokens [0, num_tokens) have K/V in the cache:
// full_blocks cover [0, full_blocks.size() * block_tokens) and can be shared as they are; when
// num_tokens is not a multiple of block_tokens, the first num_tokens % block_tokens slots of
// partial_block hold the rest and must be copied into a private block (radix mode only).
struct PrefixMatch {
  int64_t num_tokens = 0;
  std::vector<BlockId> full_blocks;
  BlockId partial_block = kInvalidBlockId;
  // Implementation data: hash of the last full block (hash mode), deepest node (radix mode).
  uint64_t last_hash = 0;
  const void* node = nullptr;
};

struct PrefixCacheStats {
  int64_t queries = 0;         // Match calls that led to an attach (admitted sequences)
  int64_t query_tokens = 0;    // prompt tokens those sequences asked for
  int64_t hit_tokens = 0;      // of which found in the cache
  int64_t evicted_blocks = 0;  // cached blocks whose content was dropped to make room
  int64_t cached_blocks = 0;   // blocks holding cached content now
};

// One entry of the cache as an inspector draws it: a cached block (hash mode: its parent is the
// block before it in the chain) or a radix tree node (its parent node). Ids are stable while the
// entry lives; parent 0 is the root (a chain's first block, a top-level node).
struct PrefixCacheNode {
  int64_t id = 0;
  int64_t parent = 0;
  int64_t tokens = 0;     // tokens the entry covers (hash: block_tokens; radix: its edge)
  int32_t blocks = 0;     // blocks it references
  int64_t hits = 0;       // admitted sequences whose match used this entry
  bool locked = false;    // a live sequence uses it (hash: a block with references; radix: locked)
  uint64_t last_use = 0;  // the cache's logical clock at the last match or insert that touched it
};

enum class PrefixCacheMode : uint8_t { kHash, kRadix };
std::string_view PrefixCacheModeName(PrefixCacheMode mode);

class PrefixCache {
 public:
  virtual ~PrefixCache() = default;
  virtual PrefixCacheMode mode() const = 0;

  // Longest cached prefix of `tokens` under `salt` (requests with different salts never share).
  // Changes nothing; the caller trims `tokens` (e.g. to all but the last prompt token).
  virtual PrefixMatch Match(std::span<const int32_t> tokens, std::string_view salt) const = 0;
  // Sequence `seq` starts from `m` (its table already holds m.full_blocks): pin what must stay
  // (radix: lock the matched path), refresh LRU positions, count the query.
  virtual void OnAttach(SeqId seq, const PrefixMatch& m, int64_t query_tokens) = 0;
  // `seq` has computed tokens[0, n) into `blocks` (its table, position order): cache what is new.
  // final_insert: the sequence is about to be released (radix inserts its decode tokens then).
  virtual void Insert(SeqId seq, std::span<const int32_t> tokens, int64_t n,
                      const std::vector<BlockId>& blocks, std::string_view salt,
                      bool final_insert) = 0;
  // `seq` is gone or its blocks are about to be released: drop its pins and progress.
  virtual void OnRelease(SeqId seq) = 0;

  // Blocks held only by the cache that eviction could return to the pool now (beyond what
  // BlockPool::num_free_blocks() already counts).
  virtual int64_t ReclaimableBlocks() const = 0;
  // How many of `blocks` consume capacity the caller counted as free when shared (evictable
  // blocks in hash mode, reclaimable ones in radix mode). One pass, however many blocks.
  virtual int64_t NumCountedAsFree(const std::vector<BlockId>& blocks) const = 0;
  // Evicts until the pool has `want` free blocks or nothing more can go; returns blocks freed.
  virtual int64_t Reclaim(int64_t want) = 0;
  // Forgets every cached entry that no sequence uses (vLLM's reset_prefix_cache).
  virtual void Clear() = 0;

  virtual PrefixCacheStats stats() const = 0;
  // At most `max_nodes` entries, parents before children, for inspection (the web page). Stops
  // once max_nodes are listed; engine thread only, like everything else here.
  virtual std::vector<PrefixCacheNode> Describe(size_t max_nodes) const = 0;
  // References the cache itself holds on `b` (radix mode), for BlockManager::CheckInvariants.
  virtual int32_t HeldRefs(BlockId b) const = 0;
  virtual Status CheckInvariants() const = 0;
};

// The cache works on `pool`, which must outlive it.
std::unique_ptr<PrefixCache> MakePrefixCache(PrefixCacheMode mode, BlockPool* pool);

}  // namespace kvforge::kvmeta
