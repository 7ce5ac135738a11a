// sched/kv_space.h — what the scheduler may ask of and do to the KV cache, without seeing bytes.
//
// The engine implements this over kvstore::PagedKvCache (bookkeeping + bytes, swap area in host
// memory); scheduler tests implement it over a plain kvmeta::BlockManager. All capacity answers
// are values: false / counts, never errors. Sequence ids are chosen by the engine.
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
  // including a copy-on-write of a shared partially-filled last block.
  virtual int64_t BlocksToGrow(int64_t seq, int64_t total_tokens) const = 0;
  // Makes `seq` hold at least `total_tokens` slots (creating it when unknown). False and no
  // change when blocks are short.
  virtual bool Grow(int64_t seq, int64_t total_tokens) = 0;
  // Releases every block of `seq` (no-op when unknown).
  virtual void Free(int64_t seq) = 0;
  // `child` shares every block of `parent` (parallel sampling / beams).
  virtual bool Fork(int64_t parent, int64_t child) = 0;

  // Swap preemption: move a sequence's blocks to a host area and back. A space without a swap
  // area returns false from CanSwapOut and the scheduler falls back to recompute.
  virtual bool CanSwapOut(int64_t seq) const = 0;
  virtual bool SwapOut(int64_t seq) = 0;
  virtual bool CanSwapIn(int64_t seq) const = 0;
  virtual bool SwapIn(int64_t seq) = 0;
};

}  // namespace kvforge::sched
