// kvmeta/compaction.h — the plan for compacting a sequence's KV slots after a policy evicted
// tokens (docs/adr/0005-kv-slots-and-eviction.md).
//
// A sequence's slots are shared by all layers (one block table, blocks hold every layer), but a
// policy keeps a different set of slots per layer. The plan moves the kept slots of each layer
// to the front, in their order (so causality stays slot order), and cuts the table to the
// longest kept list; a layer that kept fewer slots leaves the rest of that prefix dead
// [kept, new_slots) until the next compaction. Planning is pure bookkeeping: kvstore applies the
// moves to the bytes (after making the surviving blocks private) and releases the blocks past
// new_slots to the pool.
#pragma once

#include <cstdint>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::kvmeta {

struct SlotMove {
  int32_t src = 0;
  int32_t dst = 0;
  bool operator==(const SlotMove&) const = default;
};

struct CompactionPlan {
  int64_t old_slots = 0;  // table length before
  int64_t new_slots = 0;  // table length after: the longest kept list
  // Per layer: kept slots in ascending order; keep[l][i] moves to slot i.
  std::vector<std::vector<int32_t>> keep;
  // Per layer: the moves with src != dst, in ascending dst order (applying them in order never
  // overwrites a slot that is still to be read, since dst <= src).
  std::vector<std::vector<SlotMove>> moves;

  int64_t kept(size_t layer) const { return static_cast<int64_t>(keep[layer].size()); }
  int64_t evicted() const { return old_slots - new_slots; }
};

// Validates and plans. keep: one list per layer of slots to keep, strictly ascending, each in
// [0, n_slots) and outside that layer's dead range [dead_begin[l], dead_end[l]) (vectors empty
// when no layer has one). At least one slot must be kept by some layer.
Result<CompactionPlan> PlanCompaction(int64_t n_slots, std::vector<std::vector<int32_t>> keep,
                                      const std::vector<int64_t>& dead_begin,
                                      const std::vector<int64_t>& dead_end);

}  // namespace kvforge::kvmeta
