// engine/kv_space_adapter.h — sched::KvSpace over the engine's PagedKvCache, plus the host-memory
// swap area used by swap preemption. A swapped-out sequence's blocks are serialised
// (KvStore::ReadBlock) into host slots and its device blocks freed; swap-in allocates fresh
// blocks and writes the bytes back, so the sequence resumes with its KV intact.
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvstore/paged_kv_cache.h"
#include "sched/kv_space.h"

namespace kvforge::engine {

class KvOffload;

// What the prefix cache needs to know of a sequence: its token ids (prompt + generated so far)
// and the request's cache salt. tokens == nullptr for an unknown sequence.
struct SeqTokens {
  const std::vector<int32_t>* tokens = nullptr;
  std::string_view salt;
};
using SeqTokenSource = std::function<SeqTokens(int64_t seq)>;

class EngineKvSpace final : public sched::KvSpace {
 public:
  // swap_blocks: capacity of the host swap area in blocks (0 disables swapping). With a cache
  // that has prefix caching on, `tokens` must be given.
  EngineKvSpace(kvstore::PagedKvCache* cache, int64_t swap_blocks, SeqTokenSource tokens = nullptr);

  int64_t block_tokens() const override { return cache_->block_tokens(); }
  int64_t num_total_blocks() const override { return cache_->num_blocks(); }
  int64_t num_free_blocks() const override { return cache_->num_free_blocks(); }
  int64_t BlocksToGrow(int64_t seq, int64_t total_tokens) const override;
  bool Grow(int64_t seq, int64_t total_tokens) override;
  void Truncate(int64_t seq, int64_t total_tokens) override;
  void Free(int64_t seq) override;
  bool Fork(int64_t parent, int64_t child) override;
  bool CanSwapOut(int64_t seq) const override;
  bool SwapOut(int64_t seq) override;
  bool CanSwapIn(int64_t seq) const override;
  bool SwapIn(int64_t seq) override;

  bool prefix_caching() const override;
  int64_t CachedPrefixTokens(int64_t seq, int64_t num_tokens) const override;
  int64_t InflightPrefixTokens(int64_t seq, int64_t num_tokens) const override;
  bool PrefixLoading(int64_t seq, int64_t num_tokens) override;
  void PrefetchPrefix(int64_t seq, int64_t num_tokens) override;
  int64_t AttachCachedPrefix(int64_t seq, int64_t num_tokens) override;
  void OnComputed(int64_t seq, int64_t num_computed, bool in_prefill) override;

  // The offload tiers below the pool (engine/kv_offload.h), or null; must outlive this.
  void set_offload(KvOffload* offload) { offload_ = offload; }
  // Contiguous baseline: a new sequence reserves this many token slots up front.
  void set_reserve_tokens(int64_t n) { reserve_tokens_ = n; }
  int64_t swap_blocks_used() const { return swap_used_; }
  int64_t num_swapped_sequences() const { return static_cast<int64_t>(swapped_.size()); }

 private:
  // PrefixLoading (prefetch false) or PrefetchPrefix (true) for the sequence's query and hot hit.
  bool AskTiers(int64_t seq, int64_t num_tokens, bool prefetch);
  struct Swapped {
    std::optional<kvstore::CompactionState> compaction;  // an evicting sequence's slot state
    int64_t num_tokens = 0;
    std::vector<uint8_t> bytes;  // blocks x block_bytes_all_layers
    int64_t num_blocks = 0;
  };
  // The part of `seq`'s first num_tokens tokens a hit may cover (all but the last token).
  std::span<const int32_t> Query(const SeqTokens& t, int64_t num_tokens) const;
  kvmeta::PrefixMatch MatchFor(int64_t seq, int64_t num_tokens) const;
  // Chained block hashes of the full blocks of a query (for the in-flight prefix index).
  std::vector<uint64_t> BlockKeys(std::span<const int32_t> q, std::string_view salt) const;
  void DropInflight(int64_t seq, int64_t computed_blocks);
  // Extends `seq`'s hot hit of `hot` tokens of query q with chunks from the offload tiers.
  int64_t LoadFromTiers(int64_t seq, const SeqTokens& t, std::span<const int32_t> q, int64_t hot);
  // Puts the computed tokens of `seq` into the prefix cache before its blocks go.
  void FinalInsert(int64_t seq);

  kvstore::PagedKvCache* cache_;
  SeqTokenSource tokens_;
  KvOffload* offload_ = nullptr;
  std::unordered_map<int64_t, int64_t> computed_;  // committed tokens per resident sequence
  // Prompts being prefilled: block keys not yet computed, per sequence, and a count per key.
  struct InflightKeys {
    int64_t first_block = 0;  // block index of keys[0]
    std::vector<uint64_t> keys;
  };
  std::unordered_map<int64_t, InflightKeys> inflight_keys_;
  std::unordered_map<uint64_t, int32_t> inflight_;
  int64_t swap_capacity_;
  int64_t swap_used_ = 0;
  int64_t reserve_tokens_ = 0;
  std::unordered_map<int64_t, Swapped> swapped_;
};

}  // namespace kvforge::engine
