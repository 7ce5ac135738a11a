// spec/draft_model.h — a smaller model drafting for the target (speculative decoding with a draft
// model, Leviathan et al. 2023): its own weights, its own paged KV cache and workspace. Per
// target sequence the draft's cache holds K/V of a prefix of that sequence's tokens; Propose
// catches up on the tokens it has not seen and drafts up to k more in k batched forwards over all
// sequences asked for, and Keep drops what the target rejected, so the two stay in step
// (drafts the target kept stay cached: the next step does not recompute them).
// Thread-safety: engine thread only; Propose uses the caller's thread pool.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/thread_pool.h"
#include "kvforge/sampling_params.h"
#include "kvforge/status.h"
#include "kvstore/paged_kv_cache.h"
#include "model/model.h"
#include "sampling/sampler.h"

namespace kvforge::spec {

struct DraftAsk {
  int64_t seq = 0;
  const std::vector<int32_t>* tokens = nullptr;  // the target sequence: prompt + output
  int32_t k = 0;                                 // tokens wanted (>= 1)
  const SamplingParams* params = nullptr;        // temperature <= 0: greedy drafts
};

struct Draft {
  std::vector<int32_t> tokens;
  // Per drafted token, the draft's distribution it was drawn from (empty for greedy drafts:
  // point masses).
  std::vector<sampling::TokenDistribution> q;
};

class DraftModel {
 public:
  DraftModel(std::unique_ptr<model::Model> model, std::unique_ptr<kvstore::PagedKvCache> cache);

  // One draft per ask, in order; an empty draft when the draft's cache has no room for the
  // sequence (its cached K/V is then dropped, and rebuilt by a later call).
  Result<std::vector<Draft>> Propose(const std::vector<DraftAsk>& asks, kernels::ThreadPool& pool);
  // The target kept the first `n` tokens of `seq`: K/V past them (rejected drafts) goes.
  void Keep(int64_t seq, int64_t n);
  void Free(int64_t seq);

  const model::Model& model() const { return *model_; }
  const kvstore::PagedKvCache& cache() const { return *cache_; }
  int64_t CachedTokens(int64_t seq) const;

 private:
  struct SeqState {
    int64_t cached = 0;                          // tokens with K/V in cache_
    std::unique_ptr<sampling::Sampler> sampler;  // sampled drafts only
  };
  SeqState& StateFor(const DraftAsk& ask);
  // Truncates `seq`'s K/V to its first n tokens (no-op when it holds fewer).
  void Cut(int64_t seq, SeqState& st, int64_t n);

  std::unique_ptr<model::Model> model_;
  std::unique_ptr<kvstore::PagedKvCache> cache_;
  model::Workspace ws_;
  std::vector<float> logits_;  // [asks in the round][n_vocab]
  std::unordered_map<int64_t, SeqState> seqs_;
};

}  // namespace kvforge::spec
