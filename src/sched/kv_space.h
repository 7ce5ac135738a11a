// sched/kv_space.h — what the scheduler may ask of and do to the KV cache, without seeing bytes.
//
// The engine implements this over kvstore::PagedKvCache (bookkeeping + bytes, swap area in host
// memory); scheduler tests implement it over a plain kvmeta::BlockManager. All capacity answers
// are values: false / counts, never errors. Sequence ids are chosen by the engine.
//
// Contract the scheduler relies on (and keeps on its side):
//   * The scheduler is the only user that allocates or frees through this interface, so with no
//     sequence resident every block is free (Scheduler::CheckInvariants checks that).
//   * A sequence is in one of three states here: unknown, resident (holds device blocks) or
//     swapped (its slots live in the host area). Grow/BlocksToGrow/Fork are only asked about
//     unknown or resident sequences; SwapOut only of resident ones; SwapIn only of swapped ones.
//   * Answers are truthful: Grow succeeds when BlocksToGrow(seq, n) <= num_free_blocks(), and
//     SwapIn(seq) needs at most ceil(slots / block_tokens()) free blocks, where `slots` is what
//     the sequence held when it was swapped out (the scheduler budgets swap-in with that bound).
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>

namespace kvforge::sched {

class KvSpace {
 public:
  virtual ~KvSpace() = default;
  virtual int64_t block_tokens() const = 0;
  virtual int64_t num_total_blocks() const = 0;
  virtual int64_t num_free_blocks() const = 0;
  // Blocks needed so that `seq` holds `total_tokens` slots (a new sequence when unknown),
  // including a copy-on-write of a shared partially-filled last block. 0 when it already does.
  virtual int64_t BlocksToGrow(int64_t seq, int64_t total_tokens) const = 0;
  // Makes `seq` hold at least `total_tokens` slots (creating it when unknown). False and no
  // change when blocks are short.
  virtual bool Grow(int64_t seq, int64_t total_tokens) = 0;
  // Keeps the first `total_tokens` slots of resident `seq` and releases the rest (speculative
  // decoding's rejected drafts): what is kept is exactly as if the rest had never been written.
  virtual void Truncate(int64_t seq, int64_t total_tokens) = 0;
  // Releases every block of `seq`, resident or swapped out (no-op when unknown).
  virtual void Free(int64_t seq) = 0;
  // `child` (unknown) shares every block of the resident `parent` (parallel sampling / beams).
  virtual bool Fork(int64_t parent, int64_t child) = 0;

  // Swap preemption: move a sequence's blocks to a host area and back, keeping its slot count.
  // SwapOut frees the device blocks the sequence held alone. A space without a swap area returns
  // false from CanSwapOut and the scheduler falls back to recompute. The scheduler swaps every
  // sequence of a request; if one of them cannot go, it frees them all and recomputes instead.
  virtual bool CanSwapOut(int64_t seq) const = 0;
  virtual bool SwapOut(int64_t seq) = 0;
  virtual bool CanSwapIn(int64_t seq) const = 0;
  virtual bool SwapIn(int64_t seq) = 0;

  // Prefix caching (optional; a space without it keeps these defaults). `num_tokens` is the
  // sequence's known token count; the cached prefix never covers its last token (whose logits
  // must be computed). BlocksToGrow for an unknown sequence already discounts the blocks a hit
  // would share.
  virtual bool prefix_caching() const { return false; }
  // Tokens of unknown `seq` whose K/V the cache holds now.
  virtual int64_t CachedPrefixTokens(int64_t /*seq*/, int64_t /*num_tokens*/) const { return 0; }
  // Tokens of unknown `seq` that are cached or being prefilled by running sequences (the cache
  // will hold them after those prefills finish): waiting a step or two may save recomputing them.
  virtual int64_t InflightPrefixTokens(int64_t /*seq*/, int64_t /*num_tokens*/) const { return 0; }
  // Whether unknown `seq` waits for KV of its prefix coming from elsewhere (offload tiers): the
  // first call may start that transfer. The scheduler admits it later and, meanwhile, others.
  virtual bool PrefixLoading(int64_t /*seq*/, int64_t /*num_tokens*/) { return false; }
  // Unknown `seq` is not admitted yet (requests ahead of it hold the room): the space may start
  // bringing its prefix from elsewhere now, so that PrefixLoading finds it done at admission.
  virtual void PrefetchPrefix(int64_t /*seq*/, int64_t /*num_tokens*/) {}
  // Creates unknown `seq` holding its cached prefix; returns the tokens now computed (0: none).
  virtual int64_t AttachCachedPrefix(int64_t /*seq*/, int64_t /*num_tokens*/) { return 0; }
  // The scheduler committed K/V for tokens [0, num_computed) of `seq` (in_prefill: still in its
  // prompt or recompute). Called before any Free of that sequence in the same commit.
  virtual void OnComputed(int64_t /*seq*/, int64_t /*num_computed*/, bool /*in_prefill*/) {}
};

}  // namespace kvforge::sched
