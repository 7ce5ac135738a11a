// engine/kv_eviction.h — one sequence's KV eviction (docs/adr/0005-kv-slots-and-eviction.md):
// the resolved policy and budget, the statistics the forward pass's observer gathers for it, and
// the step that turns them into a compaction of the sequence's KV.
//
// Per step the engine (1) maps the scheduler's token index to the chunk's KV slot (token index -
// tokens evicted so far) and RoPE position (the token index, or the slot for cache-relative
// StreamingLLM), (2) lets PrepareChunk attach the observer the policy needs, (3) runs the forward
// and (4) calls AfterStep, which compacts when the policy says so (continuous methods once the
// sequence exceeds its budget by a block, one-shot methods when the prompt is done).
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <random>

#include "kvforge/kv_policy.h"
#include "kvpolicy/selection.h"
#include "kvpolicy/sparse_selection.h"
#include "kvstore/paged_kv_cache.h"
#include "model/model.h"

namespace kvforge::engine {

class SeqEviction {
 public:
  // `policy` must be valid and enabled. One-shot methods compress once prompt_tokens are
  // computed; a fractional budget is that fraction of budget_of tokens (-1: of the prompt).
  // n_kv_head matters for per-head selection (KvPolicy::heads), whose kept sets are per layer and
  // KV head (lanes).
  SeqEviction(const KvPolicy& policy, int64_t prompt_tokens, int32_t n_layer, int32_t n_kv_head,
              int32_t block_tokens, int64_t budget_of = -1);

  const KvPolicy& policy() const { return policy_; }
  int64_t budget() const { return budget_; }
  int64_t compactions() const { return compactions_; }
  int64_t evicted_tokens() const { return evicted_tokens_; }
  int64_t peak_slots() const { return peak_slots_; }
  // Whether a decode step may carry drafted tokens: its attention is dense and observed by no
  // statistic (a continuous observer such as H2O or TOVA would count the rejected drafts'
  // queries; sparse decode reads a one-token chunk differently from a verify chunk).
  bool AllowsDrafts() const {
    if (kvpolicy::IsSparse(policy_.kind)) return false;
    if (!kvpolicy::ObservesAttention(policy_.kind)) return true;
    return kvpolicy::IsOneShot(policy_.kind) && one_shot_done_;
  }

  // Fills the chunk's slot, RoPE position and observer for `token_pos` (the scheduler's index of
  // its first token). A sequence that lost its KV (recompute preemption) starts over here.
  void PrepareChunk(const kvstore::PagedKvCache& cache, int64_t token_pos, model::SeqChunk* chunk);
  // After the forward of a chunk ending at token index `computed`: compacts `seq` if due.
  // Returns whether it did (false also when the pool had no block for a copy-on-write: retried
  // at the next step).
  Result<bool> AfterStep(kvstore::PagedKvCache& cache, int64_t seq, int64_t computed);

 private:
  // Statistic for each live slot of a lane (higher keeps), for SelectKept: of KV head `head`, or
  // of all heads of the layer (head < 0).
  std::vector<float> LaneScores(const kvstore::PagedKvCache& cache, int64_t seq, int32_t layer,
                                int32_t head, const std::vector<int32_t>& live);
  // One layer's kept slots per lane, appended to *keep; false when nothing is dropped.
  bool SelectLayer(const kvstore::PagedKvCache& cache, int64_t seq, int32_t layer, int64_t budget,
                   std::vector<std::vector<int32_t>>* keep, std::vector<int64_t>* dead_begin,
                   std::vector<int64_t>* dead_end);
  Result<bool> Compact(kvstore::PagedKvCache& cache, int64_t seq);

  KvPolicy policy_;
  int64_t prompt_tokens_ = 0;
  int64_t budget_ = 0;
  int32_t n_layer_ = 0;
  int32_t lanes_ = 1;  // kept sets per layer: 1, or n_kv_head for per-head selection
  int32_t slack_ = 0;  // continuous methods compact once budget + slack slots are held
  bool one_shot_done_ = false;
  bool compacted_ = false;
  int64_t compactions_ = 0, evicted_tokens_ = 0, peak_slots_ = 0;
  kvpolicy::SlotScores scores_;    // [lane][slot] observer sums
  kvpolicy::SparseDecode sparse_;  // quest / nsa: what a decode step reads (evicts nothing)
  std::mt19937_64 rng_;
};

// The SeqEviction a request gets from its resolved policy (nullptr: it keeps everything).
// budget_of as in the constructor.
std::unique_ptr<SeqEviction> MakeSeqEviction(const KvPolicy& policy, int64_t prompt_tokens,
                                             int32_t n_layer, const kvstore::PagedKvCache& cache,
                                             int64_t budget_of = -1);
// Whether the cache can serve the policy: sparse decode reads block key summaries, which the
// cache keeps only when the engine's own policy is sparse.
Status CheckPolicyFitsCache(const KvPolicy& policy, const kvstore::PagedKvCache& cache);
// Context tokens a request needs: prompt + max_tokens, except that StreamingLLM's cache-relative
// positions bound it by the budget plus a block of slack (when the prompt fits the context).
int64_t ContextTokensNeeded(const KvPolicy& policy, int64_t prompt_tokens, int64_t max_tokens,
                            int32_t block_tokens, int64_t max_context);

}  // namespace kvforge::engine
