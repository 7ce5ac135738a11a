// kvpolicy/selection.h — which slots a KV eviction policy keeps, as pure functions of the
// statistics the engine gathered (docs/adr/0005-kv-slots-and-eviction.md). Nothing here knows of
// blocks, bytes or requests: the engine feeds per-layer live slots and scores and turns the
// answer into a kvmeta::CompactionPlan.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvforge/kv_policy.h"

namespace kvforge::kvpolicy {

// Tokens per sequence the policy's budget means for a prompt of `prompt_tokens` tokens
// (fractions round up), never less than what the method always keeps plus one.
int64_t BudgetTokens(const KvPolicy& p, int64_t prompt_tokens);
// SnapKV / PyramidKV: compress once when the prompt is done; the others run whenever the
// sequence exceeds its budget.
bool IsOneShot(KvPolicyKind kind);
// Methods that read attention weights from the forward pass (the observer).
bool ObservesAttention(KvPolicyKind kind);
// StreamingLLM: positions are cache-relative (keys re-rotated when they move).
bool RepositionsKeys(KvPolicyKind kind);
// Recent slots always kept (the newest token stays for every method but streaming's sinks
// handling, which keeps budget - sinks recent slots).
int64_t RecentKept(const KvPolicy& p, int64_t budget);
// Leading slots always kept (streaming's sinks).
int64_t FrontKept(const KvPolicy& p);
// SnapKV / PyramidKV observation window (default 32).
int64_t ObservationWindow(const KvPolicy& p);

// Keeps at most `budget` of `live` (ascending slots): the first `front`, the last `back`, and the
// highest-scoring of the rest (score[i] belongs to live[i]; equal scores keep the later slot).
// Returns the kept slots in ascending order; all of them when live.size() <= budget.
std::vector<int32_t> SelectKept(std::span<const int32_t> live, std::span<const float> score,
                                int64_t budget, int64_t front, int64_t back);

// AdaKV (adaptive per-head budgets) for one layer: live[h] / score[h] are KV head h's live slots
// and their scores. Every head keeps its first `front` and last `back` live slots and the
// best-scoring `alpha` of the rest of a per-head budget (the safeguard); the remaining
// heads x (budget - front - back) places go to the best-scoring (slot, head) pairs of the whole
// layer (equal scores keep the later slot, then the lower head). Returns each head's kept slots
// in ascending order; everything when no head holds more than `budget`.
std::vector<std::vector<int32_t>> SelectKeptAdaptive(std::span<const std::vector<int32_t>> live,
                                                     std::span<const std::vector<float>> score,
                                                     int64_t budget, int64_t front, int64_t back,
                                                     double alpha = 0.2);

// SnapKV's pooling: the mean over a window of `kernel` values centred on each (stride 1, the
// window cut at the ends and averaged over what is inside).
std::vector<float> AvgPool1d(std::span<const float> x, int32_t kernel);

// PyramidKV's per-layer budgets for a mean budget and observation window: the prompt part falls
// linearly from layer 0 to the last layer, the last keeping (budget - window) / beta, each plus
// the window; one layer keeps the budget.
std::vector<int64_t> PyramidBudgets(int64_t budget, int64_t window, int32_t n_layer, float beta);

// Per-lane statistic per slot, filled by the forward pass's observer: [n_lanes][stride] floats,
// a lane being a layer or (per-head selection) one KV head of a layer.
class SlotScores {
 public:
  // Room for `slots` slots per layer (existing values kept, new ones zero).
  void Ensure(int32_t n_layer, int64_t slots);
  void Clear();
  // After a compaction: slot i of layer l takes the value of keep[l][i]; the rest become zero.
  void Compact(const std::vector<std::vector<int32_t>>& keep);
  float* data() { return values_.data(); }
  int64_t stride() const { return stride_; }
  const float* layer(int32_t l) const { return values_.data() + l * stride_; }
  bool empty() const { return values_.empty(); }

 private:
  int32_t n_layer_ = 0;
  int64_t stride_ = 0;
  std::vector<float> values_;
};

}  // namespace kvforge::kvpolicy
