// engine/speculation.h — the engine's side of speculative decoding (docs/adr/0020): which
// drafter a config means (n-gram prompt lookup, or a draft model loaded, checked against the
// target's vocabulary and given its own KV cache), and the adaptive draft length per sequence.
// The step's stages use it (engine_step.cc): offers before the scheduler plans, drafts for the
// slots it granted, verification in the choice of tokens, rollback in the commit.
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/thread_pool.h"
#include "kvforge/engine_config.h"
#include "kvforge/status.h"
#include "kvstore/paged_kv_cache.h"
#include "model/model.h"
#include "spec/draft_model.h"
#include "tokenizer/tokenizer.h"

namespace kvforge::engine {

// A sequence's running acceptance: the estimated chance that a draft token is kept, the steps
// it has offered nothing since the estimate fell below kProbeBelow, and how many such steps
// pass between probes (doubling after each probe that kept nothing, up to kProbeMax).
struct DraftStats {
  double acceptance = 0.8;  // the prior: a new sequence drafts k = 8 at once
  int64_t quiet_steps = 0;
  int64_t probe_every = kProbeFirst;
  static constexpr double kProbeBelow = 0.15;
  static constexpr int64_t kProbeFirst = 16;
  static constexpr int64_t kProbeMax = 256;
};

// Tokens to draft this step (0: none). Adaptive: as many as keep the last one's chance of
// being reached (acceptance^d) above kProbeBelow, within 1..k; below that, one draft every
// probe_every steps, so that a sequence whose text turns predictable is noticed. Not adaptive: k.
int32_t DraftLength(DraftStats& stats, int32_t k, bool adaptive);
// A verification kept `accepted` of `drafted` tokens: each draft up to the first rejected one is
// a trial (a kept draft a success, the rejected one a failure); the estimate moves towards the
// step's success rate with weight by its trials.
void RecordVerify(DraftStats& stats, int64_t drafted, int64_t accepted);

class Speculator {
 public:
  // Null when the config has speculation off. A draft model is loaded and refused unless its
  // vocabulary is the target's, token for token; its KV cache holds as many token slots as
  // `target_cache` (speculative_kv_cache_dtype, auto: f16) and is calibrated like the target's.
  static Result<std::unique_ptr<Speculator>> Create(
      const EngineConfig& config, const model::Model& target, const tokenizer::Tokenizer& tok,
      const kvstore::PagedKvCache& target_cache, kernels::ThreadPool& pool, int64_t max_model_len);

  SpeculativeMethod method() const { return method_; }
  int32_t max_drafts() const { return k_; }
  bool adaptive() const { return adaptive_; }
  int32_t lookup_min() const { return lookup_min_; }
  int32_t lookup_max() const { return lookup_max_; }
  spec::DraftModel* draft_model() { return draft_.get(); }
  uint64_t draft_kv_bytes() const;

 private:
  Speculator() = default;
  SpeculativeMethod method_ = SpeculativeMethod::kOff;
  int32_t k_ = 0, lookup_min_ = 0, lookup_max_ = 0;
  bool adaptive_ = true;
  std::unique_ptr<spec::DraftModel> draft_;
};

}  // namespace kvforge::engine
