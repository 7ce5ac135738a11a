// kvmeta/compaction.h — the plan for compacting a sequence's KV slots after a policy evicted
// tokens (docs/adr/0005-kv-slots-and-eviction.md).
//
// A sequence's slots are shared by all layers (one block table, blocks hold every layer), but a
// policy keeps a different set of slots per layer (or per layer and KV head). The plan moves the
// kept slots of each layer to the front, in their order (so causality stays slot order), and cuts
// the table to the longest kept list; a layer that kept fewer slots leaves the rest of that prefix
// dead [kept, new_slots) until the next compaction. Planning is pure bookkeeping: kvstore applies
// the moves to the bytes (after making the surviving blocks private) and releases the blocks past
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

// A lane is what keeps its own set of slots: a layer, or (per-KV-head selection) one KV head
// of a layer, lane = layer * lanes_per_layer + head. The table is still one per sequence.
struct CompactionPlan {
  int64_t old_slots = 0;  // table length before
  int64_t new_slots = 0;  // table length after: the longest kept list
  int32_t lanes_per_layer = 1;
  // Per lane: kept slots in ascending order; keep[lane][i] moves to slot i.
  std::vector<std::vector<int32_t>> keep;
  // Per lane: the moves with src != dst, in ascending dst order (applying them in order never
  // overwrites a slot that is still to be read, since dst <= src).
  std::vector<std::vector<SlotMove>> moves;

  int64_t kept(size_t lane) const { return static_cast<int64_t>(keep[lane].size()); }
  int64_t evicted() const { return old_slots - new_slots; }
};

// Validates and plans. keep: one list per lane (keep.size() a multiple of lanes_per_layer) of
// slots to keep, strictly ascending, each in [0, n_slots) and outside that lane's dead range
// [dead_begin[lane], dead_end[lane]) (vectors empty when no lane has one). At least one slot
// must be kept by some lane.
Result<CompactionPlan> PlanCompaction(int64_t n_slots, std::vector<std::vector<int32_t>> keep,
                                      const std::vector<int64_t>& dead_begin,
                                      const std::vector<int64_t>& dead_end,
                                      int32_t lanes_per_layer = 1);

}  // namespace kvforge::kvmeta
