#include "kvmeta/compaction.h"

#include <algorithm>

#include "base/strings.h"

namespace kvforge::kvmeta {

Result<CompactionPlan> PlanCompaction(int64_t n_slots, std::vector<std::vector<int32_t>> keep,
                                      const std::vector<int64_t>& dead_begin,
                                      const std::vector<int64_t>& dead_end,
                                      int32_t lanes_per_layer) {
  if (keep.empty()) return Status::InvalidArgument("compaction needs a keep list per layer");
  if (lanes_per_layer < 1 || keep.size() % static_cast<size_t>(lanes_per_layer) != 0)
    return Status::InvalidArgument(
        base::StrFormat("compaction: %zu keep lists are not whole layers of %d lanes", keep.size(),
                        lanes_per_layer));
  const bool has_dead = !dead_begin.empty() || !dead_end.empty();
  if (has_dead && (dead_begin.size() != keep.size() || dead_end.size() != keep.size()))
    return Status::InvalidArgument("compaction: dead ranges must be given for every lane");
  CompactionPlan plan;
  plan.old_slots = n_slots;
  plan.lanes_per_layer = lanes_per_layer;
  plan.moves.resize(keep.size());
  for (size_t l = 0; l < keep.size(); ++l) {
    const auto& k = keep[l];
    for (size_t i = 0; i < k.size(); ++i) {
      if (k[i] < 0 || k[i] >= n_slots)
        return Status::InvalidArgument(base::StrFormat("compaction: lane %zu keeps slot %d of %lld",
                                                       l, k[i], (long long)n_slots));
      if (i > 0 && k[i] <= k[i - 1])
        return Status::InvalidArgument(
            base::StrFormat("compaction: lane %zu keep list is not strictly ascending", l));
      if (has_dead && k[i] >= dead_begin[l] && k[i] < dead_end[l])
        return Status::InvalidArgument(
            base::StrFormat("compaction: lane %zu keeps dead slot %d", l, k[i]));
      if (k[i] != static_cast<int32_t>(i)) plan.moves[l].push_back({k[i], static_cast<int32_t>(i)});
    }
    plan.new_slots = std::max<int64_t>(plan.new_slots, static_cast<int64_t>(k.size()));
  }
  if (plan.new_slots == 0) return Status::InvalidArgument("compaction would keep no slot");
  plan.keep = std::move(keep);
  return plan;
}

}  // namespace kvforge::kvmeta
