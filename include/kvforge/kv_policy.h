// kvforge/kv_policy.h — which KV tokens a sequence keeps (eviction, docs/kv_cache.md#eviction).
//
// A policy bounds a sequence's KV to a budget of tokens per layer by evicting the rest, chosen by
// the method's statistic (or, for quest / nsa, bounds the tokens a decode step reads); it is set
// per engine (EngineConfig::kv_policy) and may be overridden per request
// (SamplingParams::kv_policy). Names are those of the CLI, server and Python API.
//   none       keep everything (the default)
//   streaming  StreamingLLM: `sinks` first tokens + the most recent ones; positions are
//              cache-relative, so generation runs past the trained context in O(1) memory
//   h2o        heavy hitters by accumulated attention + a recent window (`window`, default
//              budget / 2)
//   tova       the tokens the newest query attends to most (the newest token always stays)
//   knorm      the tokens whose keys have the smallest L2 norm (newest token stays)
//   snapkv     one shot at the end of the prompt: attention of the last `window` (32) prompt
//              tokens, average-pooled over `pool_kernel` (7) slots, picks the rest of the budget;
//              the window stays; generated tokens are all kept
//   pyramidkv  snapkv with per-layer budgets falling linearly from the first layer to the last
//              (`beta` 20: the last layer keeps (budget - window) / beta), same mean budget
//   random     a uniformly random subset (control); the newest token stays
// Sparse decode keeps every token and reads fewer of them per decode step (the budget is the
// tokens read; prefill stays dense):
//   quest      Quest: per KV block, channel-wise key min/max; a decode query reads the blocks
//              with the highest upper bound sum_i max(q_i min_i, q_i max_i) (summed over the
//              query heads of a KV group) plus the newest block; layers 0 and 1 stay dense
//   nsa        training-free NSA (kv-methods.md B7): 64-token selection blocks scored by the
//              softmax of q . mean key summed over the group, always the first block and the
//              two newest, plus a sliding window of `window` (512) tokens, one exact softmax
//              over the union
// Head selection (`heads`, the eviction methods that score tokens: h2o, tova, knorm, snapkv,
// pyramidkv, random):
//   shared     one kept set per layer, scores summed over the KV heads (the default)
//   per_head   each KV head keeps its own set of the same size (kvpress's scorer presses; the
//              original SnapKV and H2O select per head)
//   adaptive   AdaKV: the layer's budget x KV heads pooled, the best-scoring (slot, head) pairs
//              win, each head keeps at least a fifth of the budget; a layer's memory follows its
//              largest head (blocks hold every head)
// Per-head sets need a KV dtype whose heads are stored apart in a row (f32, f16, bf16, fp8,
// int8, and q8_0 / q4_0 with head_dim a multiple of 32).
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvforge/status.h"

namespace kvforge {

enum class KvPolicyKind : uint8_t {
  kNone,
  kStreaming,
  kH2O,
  kTova,
  kKnorm,
  kSnapKV,
  kPyramidKV,
  kRandom,
  kQuest,
  kNsa,
};

enum class KvHeadSelection : uint8_t { kShared, kPerHead, kAdaptive };

struct KvPolicy {
  KvPolicyKind kind = KvPolicyKind::kNone;
  // >= 1: tokens kept per sequence (per layer); in (0, 1): that fraction of the prompt.
  double budget = 0;
  int32_t sinks = 4;        // streaming: attention sinks
  int32_t window = -1;      // -1: the method's default (h2o budget / 2; snapkv/pyramidkv 32)
  int32_t pool_kernel = 7;  // snapkv / pyramidkv: average-pooling width (odd)
  float beta = 20.0f;       // pyramidkv: first-to-last layer budget ratio parameter
  uint64_t seed = 0;        // random
  KvHeadSelection heads = KvHeadSelection::kShared;

  bool enabled() const { return kind != KvPolicyKind::kNone; }
  bool operator==(const KvPolicy&) const = default;
};

std::string_view KvPolicyName(KvPolicyKind kind);
// Unknown names are an error listing the known ones.
Result<KvPolicyKind> ParseKvPolicyKind(std::string_view name);
// "none", "streaming", ... separated by ", " (for help texts and errors).
std::string KvPolicyNames();
std::string_view KvHeadSelectionName(KvHeadSelection h);
// "shared", "per_head" or "adaptive"; anything else is an error naming them.
Result<KvHeadSelection> ParseKvHeadSelection(std::string_view name);
// Whether the policy keeps a different set of slots per KV head.
inline bool SelectsPerHead(const KvPolicy& p) {
  return p.enabled() && p.heads != KvHeadSelection::kShared;
}
// Clear error for impossible parameters (a budget <= 0 for an enabled policy, sinks >= budget, an
// even pooling kernel, ...).
Status ValidateKvPolicy(const KvPolicy& p);

}  // namespace kvforge
