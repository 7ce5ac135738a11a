// kvmeta/block_pool.h — the fixed set of physical KV block ids, with reference counts.
//
// Bookkeeping only: a block here is an index; its bytes live in kvstore. Every block is in
// exactly one state:
//   kFree       ref == 0 and no content worth keeping; linked into the free stack.
//   kInUse      ref >= 1; held by `ref` block tables (or other holders, e.g. a prefix cache pin).
//   kEvictable  ref == 0 but the block carries a content hash (a full block a prefix cache may hit
//               again); linked into an LRU list and repurposed only when the free stack is empty.
// Allocate() pops the free stack. The stack is LIFO on purpose: the block freed last is reused
// first, which keeps the working set of block ids small and its bytes warm in CPU caches. When the
// free stack is empty, Allocate() evicts the least recently released evictable block and tells the
// eviction listener (so a prefix cache can drop its hash -> block entry). Running out of blocks is
// an ordinary outcome (std::nullopt / false), never an error. num_free_blocks() counts free plus
// evictable blocks, because both can be handed out.
//
// Prefix-cache hooks (the cache itself lives elsewhere): SetHash() marks an in-use block as
// holding hashable content; Acquire() takes a reference on a block found by hash, reviving it if
// it was evictable; ClearHash() forgets the content (an evictable block becomes free);
// EvictAll() drops every cached zero-ref block.
//
// Invariants (CheckInvariants): kFree <=> ref == 0 && no hash && on the free stack; kEvictable
// <=> ref == 0 && hash && on the LRU list; kInUse <=> ref >= 1; both lists are well formed with
// no duplicates and their lengths match the counters; free + evictable + in-use == num_blocks.
// Complexity: Allocate, AddRef, Release, Acquire, SetHash, ClearHash are O(1); AllocateMany is
// O(n); EvictAll and CheckInvariants are O(num_blocks). Memory: 24 bytes per block.
// Thread-safety: none. The pool belongs to the engine thread, like all of kvmeta.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "kvforge/status.h"
#include "kvmeta/ids.h"

namespace kvforge::kvmeta {

struct BlockPoolConfig {
  int32_t num_blocks = 0;     // physical blocks in the pool, >= 1
  int32_t block_tokens = 16;  // token slots per block, >= 1 (vLLM's CUDA default is 16)
};

enum class BlockState : uint8_t { kFree = 0, kInUse = 1, kEvictable = 2 };

class BlockPool {
 public:
  // Called when Allocate() or EvictAll() drops the content of an evictable block.
  using EvictionListener = std::function<void(BlockId block, uint64_t hash)>;
  // Called whenever a block's content stops being kept: an evictable block evicted or cleared,
  // an unhashed block released to the free stack, or an in-use block about to be written in
  // place (NoteInPlaceWrite). The bytes are still intact when it runs (nothing has been handed
  // out or written yet), so a write-back tier can copy them.
  using ContentDropObserver = std::function<void(BlockId block)>;

  // Validates the config (num_blocks >= 1, block_tokens >= 1).
  static Result<BlockPool> Create(const BlockPoolConfig& config);

  BlockPool(BlockPool&&) = default;
  BlockPool& operator=(BlockPool&&) = default;
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(meta_.size()); }
  int32_t block_tokens() const { return block_tokens_; }
  // Blocks Allocate() can hand out now: free plus evictable.
  int32_t num_free_blocks() const { return num_free_ + num_evictable_; }
  int32_t num_evictable_blocks() const { return num_evictable_; }
  int32_t num_used_blocks() const { return num_blocks() - num_free_blocks(); }
  // In-use blocks referenced more than once (prefix sharing, forks): kept as a count, O(1).
  int32_t num_shared_blocks() const { return num_shared_; }
  // Fraction of blocks in use, 0..1 (vLLM's kv_cache_usage_perc).
  double Usage() const;

  // One block with ref == 1, or nullopt when nothing is free or evictable.
  std::optional<BlockId> Allocate();
  // All-or-nothing: appends n fresh blocks (ref == 1) to *out and returns true, or changes
  // nothing and returns false when fewer than n blocks are available. n >= 0.
  [[nodiscard]] bool AllocateMany(int64_t n, std::vector<BlockId>* out);

  // ref++ on an in-use block (sharing it with another table).
  void AddRef(BlockId block);
  // ref--; at zero the block goes to the LRU list if it has a hash, else onto the free stack.
  void Release(BlockId block);
  // Takes a reference on a block found through its hash: an in-use block gets ref++, an
  // evictable block is revived with ref == 1. Acquiring a free block is a programming error.
  void Acquire(BlockId block);

  // Marks an in-use block as holding content identified by `hash` (a full, immutable block).
  void SetHash(BlockId block, uint64_t hash);
  // Forgets the content hash; an evictable block becomes free. No-op if there is no hash.
  void ClearHash(BlockId block);
  std::optional<uint64_t> Hash(BlockId block) const;
  // A private in-use block is about to be written where it is (copy-on-write found it unshared):
  // tells the content-drop observer, whose copy of the old bytes must be taken now.
  void NoteInPlaceWrite(BlockId block);
  // Turns every evictable block into a free one (notifying the listener); returns how many.
  int32_t EvictAll();
  void SetEvictionListener(EvictionListener listener) { eviction_listener_ = std::move(listener); }
  void SetContentDropObserver(ContentDropObserver observer) {
    content_drop_observer_ = std::move(observer);
  }

  // The evictable blocks, the one Allocate() repurposes first at the front (LRU order). O(n).
  std::vector<BlockId> EvictionOrder() const;
  int32_t RefCount(BlockId block) const;
  BlockState State(BlockId block) const;
  bool IsShared(BlockId block) const { return RefCount(block) > 1; }
  bool Contains(BlockId block) const {
    return BlockIndex(block) >= 0 && BlockIndex(block) < num_blocks();
  }

  Status CheckInvariants() const;

 private:
  struct Meta {
    uint64_t hash = 0;
    int32_t ref_count = 0;
    int32_t next = -1;  // free stack: next free index; LRU list: next (more recent) index
    int32_t prev = -1;  // LRU list only: previous (older) index
    BlockState state = BlockState::kFree;
    bool has_hash = false;
  };

  BlockPool(int32_t num_blocks, int32_t block_tokens);
  Meta& At(BlockId block);
  const Meta& At(BlockId block) const;
  void PushFree(int32_t index);
  int32_t PopFree();
  void LruPushBack(int32_t index);
  void LruUnlink(int32_t index);
  // Drops the content of the evictable block `index` and moves it to kInUse (ref 1) or kFree.
  void EvictInto(int32_t index, BlockState target);

  std::vector<Meta> meta_;  // [num_blocks]
  int32_t block_tokens_ = 0;
  int32_t free_head_ = -1;  // top of the LIFO free stack
  int32_t lru_head_ = -1;   // least recently released evictable block (evicted first)
  int32_t lru_tail_ = -1;   // most recently released evictable block
  int32_t num_free_ = 0;
  int32_t num_evictable_ = 0;
  int32_t num_shared_ = 0;  // in-use blocks with ref_count > 1
  void NotifyContentDrop(int32_t index) const {
    if (content_drop_observer_) content_drop_observer_(MakeBlockId(index));
  }

  EvictionListener eviction_listener_;
  ContentDropObserver content_drop_observer_;
};

}  // namespace kvforge::kvmeta
