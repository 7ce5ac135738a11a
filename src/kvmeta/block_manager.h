// kvmeta/block_manager.h — owns the BlockPool and one BlockTable per live sequence.
//
// The admission scheduler asks it questions (CanAllocate for a new prompt, CanAppend for a
// running sequence, free-block counts, usage) and the engine's single commit point applies the
// answers (Allocate, AppendSlots, MakeWritable, Fork, Truncate, Free). Capacity shortfalls are
// values (AllocStatus, WriteOutcome::missing_blocks); a caller mistake such as an unknown or
// duplicate SeqId or a negative count is a Status.
//
// Watermark (as in vLLM v0): floor(watermark * num_blocks) blocks are held back when admitting
// new sequences, so running sequences can keep decoding for a while without preemption. A prompt
// that could never fit next to the watermark is kNever; one that fits only after others finish
// is kLater. Appends to running sequences may use the watermark blocks.
//
// Invariants (CheckInvariants): the pool's invariants; each table's invariants with the pool's
// block_tokens; for every block, pool ref count == number of table entries naming it (there are
// no other holders yet: a prefix cache that pins blocks would add its holds to this count), so
// free/evictable blocks are referenced by no table.
// Complexity: queries O(1) except CanAppend (O(1) per table); Fork/Free O(blocks of the
// sequence); CheckInvariants O(num_blocks + total table entries).
// Thread-safety: none (engine thread only).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "kvforge/status.h"
#include "kvmeta/block_pool.h"
#include "kvmeta/block_table.h"
#include "kvmeta/ids.h"

namespace kvforge::kvmeta {

struct BlockManagerConfig {
  int32_t num_blocks = 0;     // physical blocks, >= 1
  int32_t block_tokens = 16;  // token slots per block, >= 1
  double watermark = 0.01;    // fraction of blocks kept free at admission, 0 <= w < 1
};

enum class AllocStatus : uint8_t {
  kOk,     // fits now (leaving the watermark free)
  kLater,  // does not fit now, would fit once other sequences free their blocks
  kNever,  // larger than the whole pool minus the watermark: reject the request
};

class BlockManager {
 public:
  static Result<BlockManager> Create(const BlockManagerConfig& config);

  BlockManager(BlockManager&&) = default;
  BlockManager& operator=(BlockManager&&) = default;
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  // --- Queries for the admission scheduler -------------------------------------------------
  int32_t block_tokens() const { return pool_.block_tokens(); }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  int32_t num_used_blocks() const { return pool_.num_used_blocks(); }
  int32_t watermark_blocks() const { return watermark_blocks_; }
  double Usage() const { return pool_.Usage(); }
  int64_t num_sequences() const { return static_cast<int64_t>(tables_.size()); }
  // Blocks a fresh sequence of num_tokens tokens needs: ceil(num_tokens / block_tokens).
  int64_t BlocksForPrompt(int64_t num_tokens) const;
  // Can a new sequence with num_tokens prompt tokens be admitted? (num_tokens >= 0)
  AllocStatus CanAllocate(int64_t num_tokens) const;
  // Blocks the pool must supply to append n tokens to seq (incl. copy-on-write), or -1 if the
  // sequence is unknown.
  int64_t BlocksNeededToAppend(SeqId seq, int64_t n) const;
  // True if seq exists and n more tokens fit now (incl. copy-on-write).
  bool CanAppend(SeqId seq, int64_t n) const;

  bool Contains(SeqId seq) const { return tables_.count(seq) != 0; }
  // nullptr if unknown. Valid until the next mutation of this manager.
  const BlockTable* Find(SeqId seq) const;
  // Live sequence ids in ascending order (for deterministic iteration).
  std::vector<SeqId> Sequences() const;

  // --- Mutations ---------------------------------------------------------------------------
  // Creates seq with num_tokens token slots. On shortage returns missing_blocks > 0 and creates
  // nothing. Does not apply the watermark: ask CanAllocate first.
  Result<WriteOutcome> Allocate(SeqId seq, int64_t num_tokens);
  // Creates seq from full blocks found in a prefix cache (each Acquire()d: shared if in use,
  // revived if evictable). The blocks must hold content (not free).
  Status AttachCached(SeqId seq, const std::vector<BlockId>& blocks);
  Result<WriteOutcome> AppendSlots(SeqId seq, int64_t n);
  Result<WriteOutcome> MakeWritable(SeqId seq, int64_t begin, int64_t end,
                                    bool keep_cached = false);
  // child shares every block of parent (child must not exist yet).
  Status Fork(SeqId parent, SeqId child);
  Status Truncate(SeqId seq, int64_t num_tokens);
  Status PopTokens(SeqId seq, int64_t n);
  // Releases all blocks of seq and forgets it.
  Status Free(SeqId seq);

  // Prefix-cache hooks (hashes, eviction listener, Acquire) operate on the pool directly.
  const BlockPool& pool() const { return pool_; }
  BlockPool& mutable_pool() { return pool_; }

  // Holders other than tables (a radix prefix cache's nodes) reported per block, so that
  // CheckInvariants can still equate ref counts with holders.
  void SetExternalRefs(std::function<int32_t(BlockId)> refs) { external_refs_ = std::move(refs); }

  Status CheckInvariants() const;

 private:
  BlockManager(BlockPool pool, int32_t watermark_blocks);
  Result<BlockTable*> FindMutable(SeqId seq);

  BlockPool pool_;
  int32_t watermark_blocks_ = 0;
  std::unordered_map<SeqId, BlockTable> tables_;
  std::function<int32_t(BlockId)> external_refs_;
};

}  // namespace kvforge::kvmeta
