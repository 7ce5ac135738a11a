// tests/sched/fake_kv_space.h — sched::KvSpace over a real kvmeta::BlockManager (the device
// blocks) plus a fake host swap area of configurable capacity, in blocks. Swapped sequences keep
// their slot count; each swapped sequence takes ceil(slots / block_tokens) host blocks (sharing
// between sequences is not preserved by the swap, as in the engine's adapter), and swap-in gives
// it fresh private blocks.
//
// Misuse by the scheduler (growing a swapped sequence, swapping in one that is not swapped out,
// forking onto an existing id, ...) is recorded; CheckInvariants() reports it together with the
// BlockManager's own invariants and the swap-area accounting.
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvforge/status.h"
#include "kvmeta/block_manager.h"
#include "sched/kv_space.h"

namespace kvforge::sched::testing {

class FakeKvSpace final : public KvSpace {
 public:
  // swap_blocks: host capacity in blocks (0: no swap area, CanSwapOut is always false).
  FakeKvSpace(int32_t num_blocks, int32_t block_tokens, int64_t swap_blocks);

  int64_t block_tokens() const override { return mgr_->block_tokens(); }
  int64_t num_total_blocks() const override { return mgr_->num_blocks(); }
  int64_t num_free_blocks() const override { return mgr_->num_free_blocks(); }
  int64_t BlocksToGrow(int64_t seq, int64_t total_tokens) const override;
  bool Grow(int64_t seq, int64_t total_tokens) override;
  void Truncate(int64_t seq, int64_t total_tokens) override;
  void Free(int64_t seq) override;
  bool Fork(int64_t parent, int64_t child) override;
  bool CanSwapOut(int64_t seq) const override;
  bool SwapOut(int64_t seq) override;
  bool CanSwapIn(int64_t seq) const override;
  bool SwapIn(int64_t seq) override;

  bool IsResident(int64_t seq) const;
  bool IsSwapped(int64_t seq) const { return swapped_.count(seq) != 0; }
  // Token slots of a resident or swapped sequence; -1 if unknown.
  int64_t Slots(int64_t seq) const;
  int64_t num_resident_sequences() const { return mgr_->num_sequences(); }
  int64_t num_swapped_sequences() const { return static_cast<int64_t>(swapped_.size()); }
  int64_t swap_blocks_used() const { return swap_used_; }
  int64_t num_swap_outs() const { return num_swap_outs_; }
  int64_t num_swap_ins() const { return num_swap_ins_; }
  const kvmeta::BlockManager& manager() const { return *mgr_; }

  Status CheckInvariants() const;

 private:
  int64_t HostBlocks(int64_t tokens) const;
  void Misuse(const std::string& what) const;
  bool Applied(const Result<kvmeta::WriteOutcome>& r) const;

  std::unique_ptr<kvmeta::BlockManager> mgr_;
  int64_t swap_capacity_;
  int64_t swap_used_ = 0;
  std::unordered_map<int64_t, int64_t> swapped_;  // seq -> slots
  int64_t num_swap_outs_ = 0;
  int64_t num_swap_ins_ = 0;
  mutable std::vector<std::string> misuse_;
};

}  // namespace kvforge::sched::testing
