#include "kvmeta/block_table.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "base/check.h"
#include "base/strings.h"

namespace kvforge::kvmeta {

BlockTable::BlockTable(int32_t block_tokens) : block_tokens_(block_tokens) {
  KVF_CHECK_MSG(block_tokens >= 1, "kvmeta: block_tokens must be >= 1");
}

int64_t BlockTable::spare_slots() const {
  return static_cast<int64_t>(blocks_.size()) * block_tokens_ - num_tokens_;
}

SlotRef BlockTable::Slot(int64_t token_index) const {
  KVF_CHECK_MSG(token_index >= 0 && token_index < num_tokens_, "kvmeta: token index out of range");
  return SlotRef{blocks_[static_cast<size_t>(token_index / block_tokens_)],
                 static_cast<int32_t>(token_index % block_tokens_)};
}

int32_t BlockTable::TokensInBlock(int32_t logical) const {
  const int64_t start = static_cast<int64_t>(logical) * block_tokens_;
  return static_cast<int32_t>(std::min<int64_t>(block_tokens_, num_tokens_ - start));
}

int64_t BlockTable::BlocksNeededToAppend(const BlockPool& pool, int64_t n) const {
  KVF_CHECK_MSG(n >= 0, "kvmeta: cannot append a negative number of tokens");
  if (n == 0) return 0;
  KVF_CHECK_MSG(n <= std::numeric_limits<int64_t>::max() - num_tokens_,
                "kvmeta: token count overflow");
  int64_t needed = BlocksForTokens(num_tokens_ + n, block_tokens_) - num_blocks();
  if (num_tokens_ % block_tokens_ != 0 && pool.IsShared(blocks_.back())) ++needed;
  return needed;
}

int64_t BlockTable::BlocksNeededToWrite(const BlockPool& pool, int64_t begin, int64_t end,
                                        bool keep_cached) const {
  KVF_CHECK_MSG(0 <= begin && begin <= end && end <= num_tokens_, "kvmeta: bad write range");
  if (begin == end) return 0;
  int64_t needed = 0;
  for (int64_t b = begin / block_tokens_; b <= (end - 1) / block_tokens_; ++b) {
    const BlockId id = blocks_[static_cast<size_t>(b)];
    if (pool.IsShared(id) || (keep_cached && pool.Hash(id).has_value())) ++needed;
  }
  return needed;
}

void BlockTable::CopyOnWrite(BlockPool& pool, int32_t logical, WriteOutcome* outcome,
                             bool keep_cached) {
  BlockId& slot = blocks_[static_cast<size_t>(logical)];
  if (!pool.IsShared(slot) && !(keep_cached && pool.Hash(slot).has_value())) {
    // Private block: write in place, but its content no longer matches any hash it carried.
    pool.ClearHash(slot);
    pool.NoteInPlaceWrite(slot);
    return;
  }
  std::optional<BlockId> fresh = pool.Allocate();
  KVF_CHECK_MSG(fresh.has_value(), "kvmeta: copy-on-write ran out of blocks after the check");
  outcome->copies.push_back(BlockCopy{slot, *fresh, TokensInBlock(logical)});
  ++outcome->new_blocks;
  pool.Release(slot);  // other holders keep it alive, or it stays cached (evictable, hashed)
  slot = *fresh;
}

WriteOutcome BlockTable::AppendSlots(BlockPool& pool, int64_t n) {
  KVF_DCHECK(pool.block_tokens() == block_tokens_);
  WriteOutcome outcome;
  const int64_t needed = BlocksNeededToAppend(pool, n);
  if (needed > pool.num_free_blocks()) {
    outcome.missing_blocks = needed - pool.num_free_blocks();
    return outcome;
  }
  if (n == 0) return outcome;
  if (num_tokens_ % block_tokens_ != 0) CopyOnWrite(pool, num_blocks() - 1, &outcome);
  const int64_t grow = BlocksForTokens(num_tokens_ + n, block_tokens_) - num_blocks();
  const bool allocated = pool.AllocateMany(grow, &blocks_);
  KVF_CHECK_MSG(allocated, "kvmeta: pool shrank between check and allocation");
  outcome.new_blocks += grow;
  num_tokens_ += n;
  return outcome;
}

WriteOutcome BlockTable::MakeWritable(BlockPool& pool, int64_t begin, int64_t end,
                                      bool keep_cached) {
  KVF_DCHECK(pool.block_tokens() == block_tokens_);
  WriteOutcome outcome;
  const int64_t needed = BlocksNeededToWrite(pool, begin, end, keep_cached);
  if (needed > pool.num_free_blocks()) {
    outcome.missing_blocks = needed - pool.num_free_blocks();
    return outcome;
  }
  if (begin == end) return outcome;
  const auto first = static_cast<int32_t>(begin / block_tokens_);
  const auto last = static_cast<int32_t>((end - 1) / block_tokens_);
  for (int32_t b = first; b <= last; ++b) CopyOnWrite(pool, b, &outcome, keep_cached);
  return outcome;
}

BlockTable BlockTable::Fork(BlockPool& pool) const {
  KVF_DCHECK(pool.block_tokens() == block_tokens_);
  BlockTable child(block_tokens_);
  child.blocks_ = blocks_;
  child.num_tokens_ = num_tokens_;
  for (BlockId block : blocks_) pool.AddRef(block);
  return child;
}

void BlockTable::Truncate(BlockPool& pool, int64_t num_tokens) {
  KVF_CHECK_MSG(num_tokens >= 0 && num_tokens <= num_tokens_, "kvmeta: bad truncate length");
  const auto keep = static_cast<size_t>(BlocksForTokens(num_tokens, block_tokens_));
  while (blocks_.size() > keep) {
    pool.Release(blocks_.back());
    blocks_.pop_back();
  }
  num_tokens_ = num_tokens;
}

void BlockTable::PopTokens(BlockPool& pool, int64_t n) {
  KVF_CHECK_MSG(n >= 0 && n <= num_tokens_, "kvmeta: cannot pop more tokens than held");
  Truncate(pool, num_tokens_ - n);
}

void BlockTable::Free(BlockPool& pool) {
  // Last block first: with a prefix cache, deep blocks then sit older in the LRU than the shared
  // head blocks and are evicted first (the vLLM order).
  Truncate(pool, 0);
}

void BlockTable::AppendCachedBlock(BlockPool& pool, BlockId block) {
  KVF_CHECK_MSG(num_tokens_ % block_tokens_ == 0,
                "kvmeta: a cached block can only follow a full block");
  pool.Acquire(block);
  blocks_.push_back(block);
  num_tokens_ += block_tokens_;
}

Status BlockTable::CheckInvariants() const {
  if (block_tokens_ < 1) return Status::Internal("kvmeta table: block_tokens < 1");
  if (num_tokens_ < 0) return Status::Internal("kvmeta table: negative num_tokens");
  const int64_t want = BlocksForTokens(num_tokens_, block_tokens_);
  if (want != num_blocks()) {
    return Status::Internal(base::StrFormat(
        "kvmeta table: %d blocks for %lld tokens of %d per block (want %lld)", num_blocks(),
        static_cast<long long>(num_tokens_), block_tokens_, static_cast<long long>(want)));
  }
  std::vector<BlockId> sorted = blocks_;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (!IsValid(sorted[i])) return Status::Internal("kvmeta table: invalid block id");
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      return Status::Internal("kvmeta table: " + ToString(sorted[i]) + " appears twice");
    }
  }
  return Status::Ok();
}

}  // namespace kvforge::kvmeta
