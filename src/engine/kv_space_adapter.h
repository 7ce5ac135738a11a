// engine/kv_space_adapter.h — sched::KvSpace over the engine's PagedKvCache, plus the host-memory
// swap area used by swap preemption. A swapped-out sequence's blocks are serialised
// (KvStore::ReadBlock) into host slots and its device blocks freed; swap-in allocates fresh
// blocks and writes the bytes back, so the sequence resumes with its KV intact.
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kvstore/paged_kv_cache.h"
#include "sched/kv_space.h"

namespace kvforge::engine {

class EngineKvSpace final : public sched::KvSpace {
 public:
  // swap_blocks: capacity of the host swap area in blocks (0 disables swapping).
  EngineKvSpace(kvstore::PagedKvCache* cache, int64_t swap_blocks);

  int64_t block_tokens() const override { return cache_->block_tokens(); }
  int64_t num_total_blocks() const override { return cache_->num_blocks(); }
  int64_t num_free_blocks() const override { return cache_->num_free_blocks(); }
  int64_t BlocksToGrow(int64_t seq, int64_t total_tokens) const override;
  bool Grow(int64_t seq, int64_t total_tokens) override;
  void Free(int64_t seq) override;
  bool Fork(int64_t parent, int64_t child) override;
  bool CanSwapOut(int64_t seq) const override;
  bool SwapOut(int64_t seq) override;
  bool CanSwapIn(int64_t seq) const override;
  bool SwapIn(int64_t seq) override;

  // Contiguous baseline: a new sequence reserves this many token slots up front.
  void set_reserve_tokens(int64_t n) { reserve_tokens_ = n; }
  int64_t swap_blocks_used() const { return swap_used_; }
  int64_t num_swapped_sequences() const { return static_cast<int64_t>(swapped_.size()); }

 private:
  struct Swapped {
    int64_t num_tokens = 0;
    std::vector<uint8_t> bytes;  // blocks x block_bytes_all_layers
    int64_t num_blocks = 0;
  };
  kvstore::PagedKvCache* cache_;
  int64_t swap_capacity_;
  int64_t swap_used_ = 0;
  int64_t reserve_tokens_ = 0;
  std::unordered_map<int64_t, Swapped> swapped_;
};

}  // namespace kvforge::engine
