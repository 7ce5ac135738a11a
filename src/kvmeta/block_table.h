// kvmeta/block_table.h — one sequence's map from logical blocks to physical blocks.
//
// Logical token i lives in blocks()[i / block_tokens] at slot i % block_tokens. The table holds
// one pool reference on each of its blocks. Operations that touch references take the BlockPool
// explicitly (the table stores no pointer to it), and a table must be Free()d against its pool
// before it is dropped; BlockManager does that for the tables it owns.
//
// Copy-on-write. A block with ref > 1 is shared with other tables (after Fork, or a prefix-cache
// hit) and is read-only. Any operation that is about to write token slots of a shared block first
// puts a fresh block in its place and reports a BlockCopy {src, dst, num_tokens}: the byte store
// (kvstore) must copy the first num_tokens slots of src to dst before the write happens. Here
// that covers the partially filled last block on AppendSlots, and any range passed to
// MakeWritable (beam search or speculative decoding overwriting slots it already holds). A write
// into an unshared block that carries a content hash clears the hash: its content will change.
//
// All-or-nothing: when the pool has too few blocks, a mutation changes nothing and returns
// WriteOutcome{missing_blocks > 0}. Running out is an ordinary outcome, not an error.
//
// Invariants (CheckInvariants): num_blocks() == ceil(num_tokens / block_tokens); every id is
// valid and appears once in the table. Complexity: AppendSlots O(new blocks + 1), MakeWritable
// O(blocks in range), Fork and Free O(num_blocks), Truncate O(dropped blocks).
// Thread-safety: none (engine thread only).
#pragma once

#include <cstdint>
#include <vector>

#include "kvforge/status.h"
#include "kvmeta/block_pool.h"
#include "kvmeta/ids.h"

namespace kvforge::kvmeta {

// A copy the byte store must do before writing: the first num_tokens token slots of block src
// (every layer, K and V) go to the same slots of block dst.
struct BlockCopy {
  BlockId src = kInvalidBlockId;
  BlockId dst = kInvalidBlockId;
  int32_t num_tokens = 0;
  bool operator==(const BlockCopy&) const = default;
};

struct WriteOutcome {
  // > 0: the pool lacked this many blocks and nothing changed. 0: done.
  int64_t missing_blocks = 0;
  // Blocks taken from the pool (new blocks plus copy-on-write destinations).
  int64_t new_blocks = 0;
  // Copy-on-write work to do before writing, in logical-block order.
  std::vector<BlockCopy> copies;
  bool ok() const { return missing_blocks == 0; }
};

// Where a token's K/V lives: physical block and slot within it.
struct SlotRef {
  BlockId block = kInvalidBlockId;
  int32_t offset = 0;
  bool operator==(const SlotRef&) const = default;
};

class BlockTable {
 public:
  explicit BlockTable(int32_t block_tokens);

  BlockTable(BlockTable&&) = default;
  BlockTable& operator=(BlockTable&&) = default;
  BlockTable(const BlockTable&) = delete;  // sharing blocks needs the pool: use Fork()
  BlockTable& operator=(const BlockTable&) = delete;

  int32_t block_tokens() const { return block_tokens_; }
  int64_t num_tokens() const { return num_tokens_; }
  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  const std::vector<BlockId>& blocks() const { return blocks_; }
  bool empty() const { return num_tokens_ == 0; }
  // Token slots that are allocated but still unused in the last block.
  int64_t spare_slots() const;
  // Physical location of token `token_index` (0 <= token_index < num_tokens()).
  SlotRef Slot(int64_t token_index) const;

  // Blocks the pool must supply to append n tokens: new blocks plus one copy-on-write block if
  // the partially filled last block is shared.
  int64_t BlocksNeededToAppend(const BlockPool& pool, int64_t n) const;
  // Blocks the pool must supply to make tokens [begin, end) writable (shared blocks in range).
  // keep_cached: blocks carrying a content hash count as shared too (see MakeWritable).
  int64_t BlocksNeededToWrite(const BlockPool& pool, int64_t begin, int64_t end,
                              bool keep_cached = false) const;

  // Reserves slots for n more tokens (n >= 0), allocating blocks on demand; the new tokens are
  // [old num_tokens, old num_tokens + n). Copy-on-writes the last block if it is shared.
  WriteOutcome AppendSlots(BlockPool& pool, int64_t n);
  // Makes the existing tokens [begin, end) safe to overwrite: every shared block in the range
  // is replaced by a private copy. 0 <= begin <= end <= num_tokens().
  // keep_cached: a private block that carries a content hash is copied too, so the prefix cache
  // keeps its content (KV compaction rewrites the kept blocks wholesale, docs/adr/0005).
  WriteOutcome MakeWritable(BlockPool& pool, int64_t begin, int64_t end, bool keep_cached = false);
  // A new table sharing every block of this one (ref++ each). O(num_blocks).
  BlockTable Fork(BlockPool& pool) const;
  // Keeps the first num_tokens tokens (<= num_tokens()); blocks past them are released.
  void Truncate(BlockPool& pool, int64_t num_tokens);
  // Drops the last n tokens (n <= num_tokens()): beam pruning, speculative rollback.
  void PopTokens(BlockPool& pool, int64_t n);
  // Releases every block (last block first) and empties the table.
  void Free(BlockPool& pool);
  // Prefix-cache hook: appends a full block found by hash (taking a reference, reviving it if it
  // was evictable). Requires num_tokens() to be a multiple of block_tokens().
  void AppendCachedBlock(BlockPool& pool, BlockId block);

  Status CheckInvariants() const;

 private:
  // Replaces blocks_[logical] by a private copy if it is shared, recording the copy.
  void CopyOnWrite(BlockPool& pool, int32_t logical, WriteOutcome* outcome,
                   bool keep_cached = false);
  // Valid tokens held by logical block `logical`.
  int32_t TokensInBlock(int32_t logical) const;

  int32_t block_tokens_;
  int64_t num_tokens_ = 0;
  std::vector<BlockId> blocks_;  // [ceil(num_tokens / block_tokens)] logical -> physical
};

// ceil(num_tokens / block_tokens) for num_tokens >= 0, block_tokens >= 1.
constexpr int64_t BlocksForTokens(int64_t num_tokens, int64_t block_tokens) {
  return num_tokens / block_tokens + (num_tokens % block_tokens != 0 ? 1 : 0);
}

}  // namespace kvforge::kvmeta
