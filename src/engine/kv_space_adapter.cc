#include "engine/kv_space_adapter.h"

#include <algorithm>

namespace kvforge::engine {

EngineKvSpace::EngineKvSpace(kvstore::PagedKvCache* cache, int64_t swap_blocks)
    : cache_(cache), swap_capacity_(swap_blocks) {}

int64_t EngineKvSpace::BlocksToGrow(int64_t seq, int64_t total_tokens) const {
  if (!cache_->Contains(seq))
    return cache_->BlocksForTokens(std::max(total_tokens, reserve_tokens_));
  return cache_->BlocksToGrow(seq, total_tokens);
}

bool EngineKvSpace::Grow(int64_t seq, int64_t total_tokens) {
  if (!cache_->Contains(seq))
    return cache_->AddSequence(seq, std::max(total_tokens, reserve_tokens_));
  return cache_->EnsureTokens(seq, total_tokens);
}

void EngineKvSpace::Free(int64_t seq) {
  cache_->Free(seq);
  if (auto it = swapped_.find(seq); it != swapped_.end()) {
    swap_used_ -= it->second.num_blocks;
    swapped_.erase(it);
  }
}

bool EngineKvSpace::Fork(int64_t parent, int64_t child) { return cache_->Fork(parent, child).ok(); }

bool EngineKvSpace::CanSwapOut(int64_t seq) const {
  // A KIVI window lives outside the blocks and would be lost: such sequences are recomputed.
  if (cache_->has_sequence_state()) return false;
  const auto* blocks = cache_->Blocks(seq);
  return blocks != nullptr && swap_used_ + static_cast<int64_t>(blocks->size()) <= swap_capacity_;
}

bool EngineKvSpace::SwapOut(int64_t seq) {
  if (!CanSwapOut(seq)) return false;
  const auto* blocks = cache_->Blocks(seq);
  const uint64_t bb = cache_->store().block_bytes_all_layers();
  Swapped s;
  s.num_tokens = cache_->NumTokens(seq);
  s.num_blocks = static_cast<int64_t>(blocks->size());
  s.bytes.resize(static_cast<size_t>(bb) * blocks->size());
  for (size_t i = 0; i < blocks->size(); ++i)
    cache_->store().ReadBlock((*blocks)[i], s.bytes.data() + i * bb);
  swap_used_ += s.num_blocks;
  cache_->Free(seq);
  swapped_[seq] = std::move(s);
  return true;
}

bool EngineKvSpace::CanSwapIn(int64_t seq) const {
  auto it = swapped_.find(seq);
  return it != swapped_.end() &&
         cache_->BlocksForTokens(it->second.num_tokens) <= cache_->num_free_blocks();
}

bool EngineKvSpace::SwapIn(int64_t seq) {
  auto it = swapped_.find(seq);
  if (it == swapped_.end() || !cache_->AddSequence(seq, it->second.num_tokens)) return false;
  const auto* blocks = cache_->Blocks(seq);
  const uint64_t bb = cache_->store().block_bytes_all_layers();
  for (size_t i = 0; i < blocks->size(); ++i)
    cache_->mutable_store().WriteBlock((*blocks)[i], it->second.bytes.data() + i * bb);
  swap_used_ -= it->second.num_blocks;
  swapped_.erase(it);
  return true;
}

}  // namespace kvforge::engine
