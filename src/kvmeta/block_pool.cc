#include "kvmeta/block_pool.h"

#include <limits>
#include <string>
#include <utility>

#include "base/check.h"
#include "base/strings.h"

namespace kvforge::kvmeta {

Result<BlockPool> BlockPool::Create(const BlockPoolConfig& config) {
  if (config.num_blocks < 1) {
    return Status::InvalidArgument(
        base::StrFormat("kvmeta: num_blocks must be >= 1, got %d", config.num_blocks));
  }
  if (config.block_tokens < 1) {
    return Status::InvalidArgument(
        base::StrFormat("kvmeta: block_tokens must be >= 1, got %d", config.block_tokens));
  }
  return BlockPool(config.num_blocks, config.block_tokens);
}

BlockPool::BlockPool(int32_t num_blocks, int32_t block_tokens)
    : meta_(static_cast<size_t>(num_blocks)), block_tokens_(block_tokens) {
  // Push in reverse so that the first allocations hand out ids 0, 1, 2, ... (readable tests).
  for (int32_t i = num_blocks - 1; i >= 0; --i) PushFree(i);
}

double BlockPool::Usage() const {
  return static_cast<double>(num_used_blocks()) / static_cast<double>(num_blocks());
}

BlockPool::Meta& BlockPool::At(BlockId block) {
  KVF_CHECK_MSG(Contains(block), "kvmeta: block id out of range");
  return meta_[static_cast<size_t>(BlockIndex(block))];
}

const BlockPool::Meta& BlockPool::At(BlockId block) const {
  KVF_CHECK_MSG(Contains(block), "kvmeta: block id out of range");
  return meta_[static_cast<size_t>(BlockIndex(block))];
}

void BlockPool::PushFree(int32_t index) {
  Meta& m = meta_[static_cast<size_t>(index)];
  m.state = BlockState::kFree;
  m.ref_count = 0;
  m.has_hash = false;
  m.hash = 0;
  m.prev = -1;
  m.next = free_head_;
  free_head_ = index;
  ++num_free_;
}

int32_t BlockPool::PopFree() {
  const int32_t index = free_head_;
  KVF_DCHECK(index >= 0);
  Meta& m = meta_[static_cast<size_t>(index)];
  free_head_ = m.next;
  m.next = -1;
  --num_free_;
  return index;
}

std::vector<BlockId> BlockPool::EvictionOrder() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_evictable_));
  for (int32_t i = lru_head_; i >= 0; i = meta_[static_cast<size_t>(i)].next)
    out.push_back(MakeBlockId(i));
  return out;
}

void BlockPool::LruPushBack(int32_t index) {
  Meta& m = meta_[static_cast<size_t>(index)];
  m.state = BlockState::kEvictable;
  m.next = -1;
  m.prev = lru_tail_;
  if (lru_tail_ >= 0) {
    meta_[static_cast<size_t>(lru_tail_)].next = index;
  } else {
    lru_head_ = index;
  }
  lru_tail_ = index;
  ++num_evictable_;
}

void BlockPool::LruUnlink(int32_t index) {
  Meta& m = meta_[static_cast<size_t>(index)];
  KVF_DCHECK(m.state == BlockState::kEvictable);
  if (m.prev >= 0) {
    meta_[static_cast<size_t>(m.prev)].next = m.next;
  } else {
    lru_head_ = m.next;
  }
  if (m.next >= 0) {
    meta_[static_cast<size_t>(m.next)].prev = m.prev;
  } else {
    lru_tail_ = m.prev;
  }
  m.prev = -1;
  m.next = -1;
  --num_evictable_;
}

void BlockPool::EvictInto(int32_t index, BlockState target) {
  LruUnlink(index);
  Meta& m = meta_[static_cast<size_t>(index)];
  const uint64_t old_hash = m.hash;
  m.has_hash = false;
  m.hash = 0;
  if (target == BlockState::kInUse) {
    m.state = BlockState::kInUse;
    m.ref_count = 1;
  } else {
    PushFree(index);
  }
  // Tell the listeners last, so they observe a consistent pool.
  if (eviction_listener_) eviction_listener_(MakeBlockId(index), old_hash);
  NotifyContentDrop(index);
}

std::optional<BlockId> BlockPool::Allocate() {
  if (free_head_ >= 0) {
    const int32_t index = PopFree();
    Meta& m = meta_[static_cast<size_t>(index)];
    m.state = BlockState::kInUse;
    m.ref_count = 1;
    return MakeBlockId(index);
  }
  if (lru_head_ >= 0) {
    const int32_t index = lru_head_;
    EvictInto(index, BlockState::kInUse);
    return MakeBlockId(index);
  }
  return std::nullopt;
}

bool BlockPool::AllocateMany(int64_t n, std::vector<BlockId>* out) {
  KVF_CHECK(n >= 0);
  KVF_CHECK(out != nullptr);
  if (n > num_free_blocks()) return false;
  out->reserve(out->size() + static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    std::optional<BlockId> block = Allocate();
    KVF_CHECK(block.has_value());
    out->push_back(*block);
  }
  return true;
}

void BlockPool::AddRef(BlockId block) {
  Meta& m = At(block);
  KVF_CHECK_MSG(m.state == BlockState::kInUse, "kvmeta: AddRef on a block that is not in use");
  KVF_CHECK(m.ref_count < std::numeric_limits<int32_t>::max());
  if (++m.ref_count == 2) ++num_shared_;
}

void BlockPool::Release(BlockId block) {
  Meta& m = At(block);
  KVF_CHECK_MSG(m.state == BlockState::kInUse && m.ref_count > 0,
                "kvmeta: Release on a block that is not in use (double free?)");
  if (--m.ref_count == 1) --num_shared_;
  if (m.ref_count > 0) return;
  const int32_t index = BlockIndex(block);
  if (m.has_hash) {
    LruPushBack(index);  // most recently released: evicted last
  } else {
    PushFree(index);  // LIFO: handed out by the next Allocate()
    NotifyContentDrop(index);
  }
}

void BlockPool::Acquire(BlockId block) {
  Meta& m = At(block);
  switch (m.state) {
    case BlockState::kInUse:
      AddRef(block);
      return;
    case BlockState::kEvictable:
      LruUnlink(BlockIndex(block));
      m.state = BlockState::kInUse;
      m.ref_count = 1;
      return;
    case BlockState::kFree:
      break;
  }
  KVF_CHECK_MSG(false, "kvmeta: Acquire on a free block (its content is gone)");
}

void BlockPool::SetHash(BlockId block, uint64_t hash) {
  Meta& m = At(block);
  KVF_CHECK_MSG(m.state == BlockState::kInUse, "kvmeta: SetHash on a block that is not in use");
  m.has_hash = true;
  m.hash = hash;
}

void BlockPool::ClearHash(BlockId block) {
  Meta& m = At(block);
  if (!m.has_hash) return;
  if (m.state == BlockState::kEvictable) {
    LruUnlink(BlockIndex(block));
    PushFree(BlockIndex(block));  // clears the hash
    NotifyContentDrop(BlockIndex(block));
    return;
  }
  m.has_hash = false;
  m.hash = 0;
}

void BlockPool::NoteInPlaceWrite(BlockId block) {
  KVF_CHECK_MSG(At(block).state == BlockState::kInUse,
                "kvmeta: an in-place write into a block that is not in use");
  NotifyContentDrop(BlockIndex(block));
}

std::optional<uint64_t> BlockPool::Hash(BlockId block) const {
  const Meta& m = At(block);
  if (!m.has_hash) return std::nullopt;
  return m.hash;
}

int32_t BlockPool::EvictAll() {
  int32_t evicted = 0;
  while (lru_head_ >= 0) {
    EvictInto(lru_head_, BlockState::kFree);
    ++evicted;
  }
  return evicted;
}

int32_t BlockPool::RefCount(BlockId block) const { return At(block).ref_count; }

BlockState BlockPool::State(BlockId block) const { return At(block).state; }

Status BlockPool::CheckInvariants() const {
  const int32_t n = num_blocks();
  if (block_tokens_ < 1) return Status::Internal("kvmeta pool: block_tokens < 1");
  // Per-block state vs fields.
  int32_t in_use = 0;
  int32_t shared = 0;
  int32_t free_by_state = 0;
  int32_t evictable_by_state = 0;
  for (int32_t i = 0; i < n; ++i) {
    const Meta& m = meta_[static_cast<size_t>(i)];
    switch (m.state) {
      case BlockState::kFree:
        ++free_by_state;
        if (m.ref_count != 0 || m.has_hash)
          return Status::Internal(base::StrFormat("kvmeta pool: free block %d has ref %d/hash %d",
                                                  i, m.ref_count, m.has_hash ? 1 : 0));
        break;
      case BlockState::kEvictable:
        ++evictable_by_state;
        if (m.ref_count != 0 || !m.has_hash)
          return Status::Internal(
              base::StrFormat("kvmeta pool: evictable block %d has ref %d/hash %d", i, m.ref_count,
                              m.has_hash ? 1 : 0));
        break;
      case BlockState::kInUse:
        ++in_use;
        if (m.ref_count > 1) ++shared;
        if (m.ref_count < 1)
          return Status::Internal(
              base::StrFormat("kvmeta pool: in-use block %d has ref %d", i, m.ref_count));
        break;
      default:
        return Status::Internal(base::StrFormat("kvmeta pool: block %d has a bad state", i));
    }
  }
  // Walk the free stack: every entry is a free block, seen once, count matches.
  std::vector<uint8_t> seen(static_cast<size_t>(n), 0);
  int32_t walked = 0;
  for (int32_t i = free_head_; i != -1; i = meta_[static_cast<size_t>(i)].next) {
    if (i < 0 || i >= n) return Status::Internal("kvmeta pool: free stack link out of range");
    if (seen[static_cast<size_t>(i)]) {
      return Status::Internal(base::StrFormat("kvmeta pool: block %d twice in free stack", i));
    }
    seen[static_cast<size_t>(i)] = 1;
    if (meta_[static_cast<size_t>(i)].state != BlockState::kFree)
      return Status::Internal(base::StrFormat("kvmeta pool: non-free block %d on free stack", i));
    if (++walked > n) return Status::Internal("kvmeta pool: free stack has a cycle");
  }
  if (walked != num_free_ || walked != free_by_state) {
    return Status::Internal(
        base::StrFormat("kvmeta pool: free stack holds %d blocks, counter %d, free states %d",
                        walked, num_free_, free_by_state));
  }
  // Walk the LRU list forwards, checking back links.
  walked = 0;
  int32_t prev = -1;
  for (int32_t i = lru_head_; i != -1; i = meta_[static_cast<size_t>(i)].next) {
    if (i < 0 || i >= n) return Status::Internal("kvmeta pool: LRU link out of range");
    if (seen[static_cast<size_t>(i)]) {
      return Status::Internal(base::StrFormat("kvmeta pool: block %d listed twice", i));
    }
    seen[static_cast<size_t>(i)] = 1;
    const Meta& m = meta_[static_cast<size_t>(i)];
    if (m.state != BlockState::kEvictable)
      return Status::Internal(base::StrFormat("kvmeta pool: non-evictable block %d in LRU", i));
    if (m.prev != prev) return Status::Internal(base::StrFormat("kvmeta pool: bad LRU prev %d", i));
    prev = i;
    if (++walked > n) return Status::Internal("kvmeta pool: LRU list has a cycle");
  }
  if (prev != lru_tail_) return Status::Internal("kvmeta pool: LRU tail mismatch");
  if (walked != num_evictable_ || walked != evictable_by_state) {
    return Status::Internal(
        base::StrFormat("kvmeta pool: LRU holds %d blocks, counter %d, evictable states %d", walked,
                        num_evictable_, evictable_by_state));
  }
  if (shared != num_shared_)
    return Status::Internal(base::StrFormat("kvmeta pool: %d shared blocks, counter %d", shared,
                                            num_shared_));
  if (num_free_ + num_evictable_ + in_use != n) {
    return Status::Internal(base::StrFormat("kvmeta pool: %d free + %d evictable + %d used != %d",
                                            num_free_, num_evictable_, in_use, n));
  }
  return Status::Ok();
}

}  // namespace kvforge::kvmeta
