#include "engine/kv_eviction.h"

#include <algorithm>

#include "base/strings.h"

namespace kvforge::engine {

SeqEviction::SeqEviction(const KvPolicy& policy, int64_t prompt_tokens, int32_t n_layer,
                         int32_t n_kv_head, int32_t block_tokens, int64_t budget_of)
    : policy_(policy),
      prompt_tokens_(prompt_tokens),
      budget_(kvpolicy::BudgetTokens(policy, budget_of >= 0 ? budget_of : prompt_tokens)),
      n_layer_(n_layer),
      lanes_(SelectsPerHead(policy) ? std::max(n_kv_head, 1) : 1),
      slack_(std::max<int32_t>(block_tokens, 1)),
      sparse_(kvpolicy::SparseDecodeFor(policy, budget_, block_tokens)),
      rng_(policy.seed) {}

void SeqEviction::PrepareChunk(const kvstore::PagedKvCache& cache, int64_t token_pos,
                               model::SeqChunk* chunk) {
  if (compacted_ && !cache.IsCompacted(chunk->kv_seq)) {
    // Recompute preemption freed the KV: the prompt (and what was generated) is computed again
    // and the policy runs over it afresh.
    compacted_ = false;
    one_shot_done_ = false;
    scores_.Clear();
  }
  const int64_t slot0 = token_pos - cache.Evicted(chunk->kv_seq);
  chunk->slot0 = slot0;
  if (kvpolicy::IsSparse(policy_.kind)) {  // reads fewer slots at decode, evicts nothing
    chunk->sparse = chunk->n_tokens == 1 ? &sparse_ : nullptr;
    return;
  }
  chunk->pos0 = kvpolicy::RepositionsKeys(policy_.kind) ? slot0 : token_pos;
  const KvPolicyKind k = policy_.kind;
  if (!kvpolicy::ObservesAttention(k)) return;
  int64_t from = 0;
  if (k == KvPolicyKind::kTova) {
    scores_.Clear();  // only the newest query's weights count
    from = chunk->n_tokens - 1;
  } else if (kvpolicy::IsOneShot(k)) {
    // The observation window: the last `window` prompt tokens, whichever chunks they fall in.
    const int64_t window_begin = prompt_tokens_ - kvpolicy::ObservationWindow(policy_);
    if (one_shot_done_ || token_pos + chunk->n_tokens <= window_begin) return;
    from = std::max<int64_t>(0, window_begin - token_pos);
  }
  scores_.Ensure(n_layer_ * lanes_, slot0 + chunk->n_tokens);
  chunk->observed = scores_.data();
  chunk->observed_stride = scores_.stride();
  chunk->observed_lanes = lanes_;
  chunk->observe_from = from;
}

Result<bool> SeqEviction::AfterStep(kvstore::PagedKvCache& cache, int64_t seq, int64_t computed) {
  const int64_t slots = cache.NumTokens(seq);
  peak_slots_ = std::max(peak_slots_, slots);
  if (kvpolicy::IsSparse(policy_.kind)) return false;
  if (kvpolicy::IsOneShot(policy_.kind)) {
    if (one_shot_done_ || computed < prompt_tokens_) return false;
    one_shot_done_ = true;
    if (slots <= budget_) return false;
  } else if (slots < budget_ + slack_) {
    return false;
  }
  return Compact(cache, seq);
}

std::vector<float> SeqEviction::LaneScores(const kvstore::PagedKvCache& cache, int64_t seq,
                                           int32_t layer, int32_t head,
                                           const std::vector<int32_t>& live) {
  std::vector<float> s(live.size(), 0.0f);
  switch (policy_.kind) {
    case KvPolicyKind::kH2O:
    case KvPolicyKind::kTova:
    case KvPolicyKind::kSnapKV:
    case KvPolicyKind::kPyramidKV: {
      const float* row = scores_.layer(layer * lanes_ + std::max(head, 0));
      for (size_t i = 0; i < live.size(); ++i) s[i] = row[live[i]];
      if (kvpolicy::IsOneShot(policy_.kind)) s = kvpolicy::AvgPool1d(s, policy_.pool_kernel);
      break;
    }
    case KvPolicyKind::kKnorm: {
      cache.KeyNorms(seq, layer, live, s.data(), head);
      for (float& x : s) x = -x;  // small norms are kept
      break;
    }
    case KvPolicyKind::kRandom: {
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      for (float& x : s) x = u(rng_);
      break;
    }
    default:
      break;  // streaming: sinks and recent only
  }
  return s;
}

bool SeqEviction::SelectLayer(const kvstore::PagedKvCache& cache, int64_t seq, int32_t layer,
                              int64_t budget, std::vector<std::vector<int32_t>>* keep,
                              std::vector<int64_t>* dead_begin, std::vector<int64_t>* dead_end) {
  const int64_t slots = cache.NumTokens(seq);
  const int64_t front = kvpolicy::FrontKept(policy_), back = kvpolicy::RecentKept(policy_, budget);
  std::vector<std::vector<int32_t>> live(static_cast<size_t>(lanes_));
  std::vector<std::vector<float>> score(static_cast<size_t>(lanes_));
  for (int32_t h = 0; h < lanes_; ++h) {
    const kvstore::SlotRange dead = cache.DeadSlots(layer, seq, h);
    dead_begin->push_back(dead.begin);
    dead_end->push_back(dead.end);
    auto& lv = live[static_cast<size_t>(h)];
    lv.reserve(static_cast<size_t>(slots));
    for (int64_t p = 0; p < slots; ++p)
      if (p < dead.begin || p >= dead.end) lv.push_back(static_cast<int32_t>(p));
    score[static_cast<size_t>(h)] = LaneScores(cache, seq, layer, lanes_ > 1 ? h : -1, lv);
  }
  std::vector<std::vector<int32_t>> kept;
  if (policy_.heads == KvHeadSelection::kAdaptive) {
    kept = kvpolicy::SelectKeptAdaptive(live, score, budget, front, back);
  } else {
    for (int32_t h = 0; h < lanes_; ++h)
      kept.push_back(kvpolicy::SelectKept(live[static_cast<size_t>(h)],
                                          score[static_cast<size_t>(h)], budget, front, back));
  }
  bool drops = false;
  for (int32_t h = 0; h < lanes_; ++h) {
    drops = drops || kept[static_cast<size_t>(h)].size() < live[static_cast<size_t>(h)].size();
    keep->push_back(std::move(kept[static_cast<size_t>(h)]));
  }
  return drops;
}

Result<bool> SeqEviction::Compact(kvstore::PagedKvCache& cache, int64_t seq) {
  const int64_t slots = cache.NumTokens(seq);
  std::vector<int64_t> budgets(static_cast<size_t>(n_layer_), budget_);
  if (policy_.kind == KvPolicyKind::kPyramidKV)
    budgets = kvpolicy::PyramidBudgets(budget_, kvpolicy::ObservationWindow(policy_), n_layer_,
                                       policy_.beta);
  std::vector<std::vector<int32_t>> keep;  // [lane] kept slots
  std::vector<int64_t> dead_begin, dead_end;
  bool drops = false;
  for (int32_t l = 0; l < n_layer_; ++l)
    drops = SelectLayer(cache, seq, l, budgets[static_cast<size_t>(l)], &keep, &dead_begin,
                        &dead_end) ||
            drops;
  if (!drops) return false;
  KVF_ASSIGN_OR_RETURN(
      kvmeta::CompactionPlan plan,
      kvmeta::PlanCompaction(slots, std::move(keep), dead_begin, dead_end, lanes_));
  KVF_ASSIGN_OR_RETURN(bool done,
                       cache.Compact(seq, plan, kvpolicy::RepositionsKeys(policy_.kind)));
  if (!done) return false;
  scores_.Compact(plan.keep);
  compacted_ = true;
  ++compactions_;
  evicted_tokens_ += plan.evicted();
  return true;
}

std::unique_ptr<SeqEviction> MakeSeqEviction(const KvPolicy& policy, int64_t prompt_tokens,
                                             int32_t n_layer, const kvstore::PagedKvCache& cache,
                                             int64_t budget_of) {
  if (!policy.enabled()) return nullptr;
  return std::make_unique<SeqEviction>(policy, prompt_tokens, n_layer,
                                       cache.store().config().n_kv_head, cache.block_tokens(),
                                       budget_of);
}

Status CheckPolicyFitsCache(const KvPolicy& policy, const kvstore::PagedKvCache& cache) {
  if (kvpolicy::IsSparse(policy.kind) && !cache.has_key_summaries())
    return Status::InvalidArgument(base::StrFormat(
        "kv_policy %s reads block key summaries, which this engine keeps only when its own "
        "kv_policy is quest or nsa",
        KvPolicyName(policy.kind).data()));
  if (SelectsPerHead(policy)) {
    Status st = cache.CheckPerHeadCompaction();
    if (!st.ok())
      return Status::InvalidArgument(base::StrFormat(
          "kv heads %s: %s", KvHeadSelectionName(policy.heads).data(), st.message().c_str()));
  }
  return Status::Ok();
}

int64_t ContextTokensNeeded(const KvPolicy& policy, int64_t prompt_tokens, int64_t max_tokens,
                            int32_t block_tokens, int64_t max_context) {
  const int64_t need = prompt_tokens + max_tokens;
  if (policy.kind != KvPolicyKind::kStreaming || prompt_tokens > max_context) return need;
  return std::min(need,
                  prompt_tokens + kvpolicy::BudgetTokens(policy, prompt_tokens) + block_tokens);
}

}  // namespace kvforge::engine
