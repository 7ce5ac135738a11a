// kvstore/paged_kv_cache.h — the paged KV cache the engine runs on: kvmeta's BlockManager
// (which sequence owns which blocks, ref counts, copy-on-write decisions) bound to KvStore's bytes.
//
// Every mutation goes through here so that block copies decided by the bookkeeping are applied
// to the bytes before anyone writes: AppendSlots/Fork/Truncate/Free mirror BlockManager's and
// keep a dense int32 copy of each table for the attention kernels. Running out of blocks is a
// value (false / missing blocks), never an error.
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kvforge/status.h"
#include "kvmeta/block_manager.h"
#include "kvmeta/prefix_cache.h"
#include "kvstore/kv_access.h"
#include "kvstore/kv_store.h"

namespace kvforge::kvstore {

struct PagedKvCacheConfig {
  KvStoreConfig store;  // admission watermarks are the scheduler's business, not the cache's
  bool prefix_caching = false;
  kvmeta::PrefixCacheMode prefix_mode = kvmeta::PrefixCacheMode::kHash;
};

class PagedKvCache final : public KvAccess {
 public:
  static Result<std::unique_ptr<PagedKvCache>> Create(const PagedKvCacheConfig& cfg);

  const kvmeta::BlockManager& manager() const { return mgr_; }
  const KvStore& store() const { return *store_; }
  int32_t block_tokens() const { return store_->config().block_tokens; }

  bool Contains(int64_t seq) const { return mgr_.Contains(kvmeta::MakeSeqId(seq)); }
  int64_t NumTokens(int64_t seq) const;
  // Creates `seq` with room for n_tokens. False (nothing changed) when blocks are short.
  bool AddSequence(int64_t seq, int64_t n_tokens);
  // Creates `seq` from a prefix-cache match: shares m.full_blocks and, for a token-granular hit
  // ending inside a block, copies that block's first slots into a private block. Returns the
  // tokens `seq` now holds with valid K/V (the partial part is dropped when no block is free);
  // -1 when `seq` exists already. query_tokens is what the sequence asked for (statistics).
  int64_t AttachPrefix(int64_t seq, const kvmeta::PrefixMatch& m, int64_t query_tokens);
  // nullptr when prefix caching is off.
  kvmeta::PrefixCache* prefix_cache() { return prefix_.get(); }
  const kvmeta::PrefixCache* prefix_cache() const { return prefix_.get(); }
  // Adds room for n more tokens to `seq` (copy-on-write of a shared last block included).
  bool AppendSlots(int64_t seq, int64_t n);
  // Makes sure `seq` has room for `total` tokens (no-op if it already has).
  bool EnsureTokens(int64_t seq, int64_t total);
  // `child` shares every block of `parent` (parallel sampling, beams).
  Status Fork(int64_t parent, int64_t child);
  // Keeps the first n tokens of `seq`.
  Status Truncate(int64_t seq, int64_t n);
  void Free(int64_t seq);
  // Blocks a new sequence of n tokens takes (appends: BlocksToGrow, which counts spare slots and
  // copy-on-write).
  int64_t BlocksForTokens(int64_t n) const { return mgr_.BlocksForPrompt(n); }
  // Blocks needed so that `seq` holds `total` slots (a new sequence when unknown), incl. CoW.
  int64_t BlocksToGrow(int64_t seq, int64_t total) const;
  // Physical blocks of `seq` in position order (nullptr when unknown).
  const std::vector<int32_t>* Blocks(int64_t seq) const;
  KvStore& mutable_store() { return *store_; }
  // Blocks a sequence can get now: free, evictable (hash cache) and reclaimable (radix cache).
  int64_t num_free_blocks() const {
    return mgr_.num_free_blocks() + (prefix_ ? prefix_->ReclaimableBlocks() : 0);
  }
  int64_t num_blocks() const { return mgr_.num_blocks(); }
  // Fraction of blocks held by sequences (cached-only blocks count as free, as in vLLM).
  double Usage() const {
    return 1.0 - static_cast<double>(num_free_blocks()) / static_cast<double>(num_blocks());
  }
  // Live tokens held (sum of table lengths) versus slots reserved (blocks x block_tokens).
  int64_t LiveTokens() const;

  Status CheckInvariants() const;

  // KvAccess.
  bool is_f16() const override { return store_->config().f16; }
  uint8_t* KeyRow(int32_t layer, int64_t seq, int64_t pos) override;
  uint8_t* ValueRow(int32_t layer, int64_t seq, int64_t pos) override;
  kernels::KvPageView KeyView(int32_t layer, int64_t seq) const override;
  kernels::KvPageView ValueView(int32_t layer, int64_t seq) const override;

 private:
  PagedKvCache(kvmeta::BlockManager mgr, std::unique_ptr<KvStore> store)
      : mgr_(std::move(mgr)), store_(std::move(store)) {}
  void Apply(const kvmeta::WriteOutcome& out);
  // Radix cache: evicts cached-only blocks until `n` blocks are free in the pool.
  void MakeRoom(int64_t n);
  void Refresh(int64_t seq);
  const std::vector<int32_t>& Table(int64_t seq) const;

  kvmeta::BlockManager mgr_;
  std::unique_ptr<KvStore> store_;
  std::unordered_map<int64_t, std::vector<int32_t>> tables_;  // dense copies for the kernels
  std::unique_ptr<kvmeta::PrefixCache> prefix_;  // after mgr_: destroyed before the pool
};

}  // namespace kvforge::kvstore
