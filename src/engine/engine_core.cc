#include "engine/engine_core.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "base/log.h"
#include "base/strings.h"
#include "base/token_ids.h"
#include "engine/kv_options.h"
#include "kvforge/config_names.h"

namespace kvforge {

using base::StrFormat;

EngineCore::~EngineCore() = default;

Result<std::unique_ptr<EngineCore>> EngineCore::Create(const EngineConfig& config,
                                                       int64_t concurrent_sequences) {
  std::unique_ptr<EngineCore> e(new EngineCore());
  e->cfg_ = config;
  const EngineConfig& c = config;
  KVF_ASSIGN_OR_RETURN(engine::EngineResources res,
                       engine::CreateEngineResources(
                           c, concurrent_sequences > 0 ? concurrent_sequences : c.max_num_seqs));
  e->info_ = engine::DescribeModel(res);
  e->max_len_ = res.max_model_len;
  const uint64_t per_block = res.block_bytes;
  e->model_ = std::move(res.model);
  e->tok_ = std::move(res.tok);
  e->cache_ = std::move(res.cache);
  e->pool_ = std::move(res.pool);
  const int64_t swap_blocks = c.preemption_mode == PreemptionMode::kSwap
                                  ? static_cast<int64_t>(c.swap_space_bytes / per_block)
                                  : 0;
  EngineCore* self = e.get();
  e->space_ = std::make_unique<engine::EngineKvSpace>(
      e->cache_.get(), swap_blocks, [self](int64_t seq) -> engine::SeqTokens {
        auto ow = self->seq_owner_.find(seq);
        if (ow == self->seq_owner_.end()) return {};
        auto rq = self->requests_.find(ow->second);
        if (rq == self->requests_.end()) return {};
        Seq* s = self->FindSeq(*rq->second, seq);
        if (s == nullptr) return {};
        return {&s->tokens, rq->second->params.cache_salt};
      });
  if (c.contiguous_kv) e->space_->set_reserve_tokens(e->max_len_);
  KVF_ASSIGN_OR_RETURN(e->offload_, engine::KvOffload::Create(c, *e->model_, e->cache_.get()));
  if (e->offload_) e->space_->set_offload(e->offload_.get());
  sched::SchedulerConfig sc;
  sc.max_num_batched_tokens = c.max_num_batched_tokens;
  sc.max_num_seqs = c.max_num_seqs;
  sc.chunked_prefill = c.chunked_prefill;
  sc.long_prefill_token_threshold = c.long_prefill_token_threshold;
  sc.max_itl_ms = c.max_itl_ms;
  sc.min_prefill_chunk = c.min_prefill_chunk;
  sc.max_ttft_ms = c.max_ttft_ms;
  sc.policy = c.scheduling_policy == SchedulingPolicy::kPriority ? sched::Policy::kPriority
                                                                 : sched::Policy::kFcfs;
  sc.preemption_mode = c.preemption_mode == PreemptionMode::kSwap
                           ? sched::PreemptionMode::kSwap
                           : sched::PreemptionMode::kRecompute;
  sc.static_batching = c.batching == BatchingMode::kStatic;
  sc.prefix_prefetch_requests = c.kv_offload_prefetch_requests;
  KVF_RETURN_IF_ERROR(sc.Validate());
  e->sched_ = std::make_unique<sched::Scheduler>(sc, e->space_.get());
  e->grammars_ = std::make_unique<engine::GrammarCache>(*e->tok_);
  KVF_ASSIGN_OR_RETURN(e->spec_, engine::Speculator::Create(c, *e->model_, *e->tok_, *e->cache_,
                                                            *e->pool_, e->max_len_));
  if (e->offload_) KVF_LOG_INFO("%s", e->offload_->Describe().c_str());
  return e;
}

std::unique_ptr<sampling::Sampler> EngineCore::SamplerFor(const Request& r, int32_t index) {
  SamplingParams p = r.params;
  if (p.seed != 0xFFFFFFFFull)
    p.seed += static_cast<uint64_t>(index);  // distinct streams for n > 1
  return std::make_unique<sampling::Sampler>(p);
}

std::optional<engine::SequenceGrammar> EngineCore::GrammarFor(const Request& r) {
  std::optional<engine::SequenceGrammar> g;
  if (r.grammar) g.emplace(r.grammar, r.end_tokens, r.params.structured_outputs);
  return g;
}

std::unique_ptr<EngineCore::Seq> EngineCore::NewSeq(const Request& r, int32_t index,
                                                    std::unique_ptr<sampling::Sampler> sampler) {
  auto s = std::make_unique<Seq>();
  s->id = next_seq_id_++;
  s->index = index;
  s->tokens = r.prompt;
  s->sampler = sampler ? std::move(sampler) : SamplerFor(r, index);
  s->stop = std::make_unique<engine::StopChecker>(*tok_, r.params);
  s->evict = engine::MakeSeqEviction(r.params.kv_policy.value_or(cfg_.kv_policy),
                                     static_cast<int64_t>(r.prompt.size()),
                                     static_cast<int32_t>(model_->config().n_layer), *cache_);
  s->grammar = GrammarFor(r);
  seq_owner_[s->id] = r.id;
  return s;
}

std::unique_ptr<EngineCore::Seq> EngineCore::CloneSeq(const Request& r, const Seq& from,
                                                      int32_t index) {
  auto s = NewSeq(r, index);
  s->tokens = from.tokens;
  s->n_generated = from.n_generated;
  s->cum_logprob = from.cum_logprob;
  s->token_logprobs = from.token_logprobs;
  if (from.evict) s->evict = std::make_unique<engine::SeqEviction>(*from.evict);
  s->grammar = from.grammar;
  // Beams re-render their text at the end; the stop checker restarts from the shared prefix.
  for (size_t i = r.prompt.size(); i < from.tokens.size(); ++i) s->stop->Replay(from.tokens[i]);
  return s;
}

const EngineCore::Seq* EngineCore::FindSeq(const Request& r, int64_t seq) const {
  for (const auto& s : r.seqs)  // entries may be empty while beams are being reshuffled
    if (s != nullptr && s->id == seq) return s.get();
  return nullptr;
}

EngineCore::Seq* EngineCore::FindSeq(Request& r, int64_t seq) {
  return const_cast<Seq*>(std::as_const(*this).FindSeq(std::as_const(r), seq));
}

Status EngineCore::ValidateRequest(const std::vector<int32_t>& prompt,
                                   const SamplingParams& params) const {
  KVF_RETURN_IF_ERROR(params.Validate());
  if (prompt.empty()) return Status::InvalidArgument("the prompt is empty");
  KVF_RETURN_IF_ERROR(base::CheckTokenIds(prompt, model_->config().n_vocab).WithContext("prompt"));
  if (params.max_tokens < 1) return Status::InvalidArgument("max_tokens must be at least 1");
  for (const auto& [id, bias] : params.logit_bias)
    if (id >= model_->config().n_vocab)
      return Status::InvalidArgument(
          StrFormat("logit_bias: token id %d is outside the vocabulary (%lld)", id,
                    (long long)model_->config().n_vocab));
  if (params.structured_outputs.enabled())
    KVF_RETURN_IF_ERROR(engine::CheckStructuredOutput(params.structured_outputs));
  const KvPolicy kv = params.kv_policy.value_or(cfg_.kv_policy);
  if (kv.enabled() && cfg_.contiguous_kv)
    return Status::InvalidArgument("kv_policy needs paged KV (not the contiguous_kv baseline)");
  KVF_RETURN_IF_ERROR(engine::CheckPolicyFitsCache(kv, *cache_));
  const int64_t need = engine::ContextTokensNeeded(
      kv, static_cast<int64_t>(prompt.size()), params.max_tokens, cache_->block_tokens(), max_len_);
  if (need > max_len_)
    return Status::InvalidArgument(StrFormat(
        "this request needs %lld tokens (prompt %zu + max_tokens %d) but the context holds %lld "
        "(max_model_len)",
        (long long)need, prompt.size(), params.max_tokens, (long long)max_len_));
  const int64_t width = params.beam_width > 1 ? params.beam_width : params.n;
  const int64_t blocks =
      cache_->BlocksForTokens(cfg_.contiguous_kv ? max_len_ : need) +
      (width - 1) * cache_->BlocksForTokens(params.max_tokens + cache_->block_tokens());
  if (blocks > cache_->num_blocks())
    return Status::ResourceExhausted(
        StrFormat("this request needs up to %lld KV blocks but the cache holds %lld; "
                  "raise the KV cache memory",
                  (long long)blocks, (long long)cache_->num_blocks()));
  return Status::Ok();
}

Result<int64_t> EngineCore::AddRequest(std::vector<int32_t> prompt, const SamplingParams& params,
                                       OutputCallback cb, int32_t priority, int64_t id_in) {
  KVF_RETURN_IF_ERROR(ValidateRequest(prompt, params));
  if (id_in != 0 && requests_.count(id_in)) return Status::InvalidArgument("duplicate request id");
  auto r = std::make_unique<Request>();
  r->id = id_in != 0 ? id_in : next_request_id_++;
  if (id_in >= next_request_id_) next_request_id_ = id_in + 1;
  r->prompt = std::move(prompt);
  r->params = params;
  r->cb = std::move(cb);
  r->beam = params.beam_width > 1;
  r->arrival = Clock::now();
  r->metrics.prompt_tokens = static_cast<int64_t>(r->prompt.size());
  if (params.structured_outputs.enabled()) {
    KVF_ASSIGN_OR_RETURN(r->grammar, grammars_->Get(params.structured_outputs));
    r->end_tokens = engine::EndTokens(*grammars_, params);
  }
  r->seqs.push_back(NewSeq(*r, 0));
  const int32_t width = r->beam ? params.beam_width : params.n;
  sched::NewRequest nr;
  nr.id = r->id;
  nr.seq = r->seqs[0]->id;
  nr.prompt_tokens = static_cast<int64_t>(r->prompt.size());
  nr.max_new_tokens = params.max_tokens;
  nr.priority = priority;
  nr.num_seqs = width;
  nr.max_kv_tokens =
      engine::ContextTokensNeeded(params.kv_policy.value_or(cfg_.kv_policy), nr.prompt_tokens,
                                  params.max_tokens, cache_->block_tokens(), max_len_);
  if (Status s = sched_->AddRequest(nr); !s.ok()) {
    seq_owner_.erase(r->seqs[0]->id);
    return s;
  }
  const int64_t id = r->id;
  requests_[id] = std::move(r);
  return id;
}

void EngineCore::Abort(int64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  (void)sched_->Abort(request_id);
  Request& r = *it->second;
  for (auto& s : r.seqs)
    if (!s->finished) {
      s->finished = true;
      s->finish_reason = FinishReasonName(FinishReason::kAbort);
    }
  Emit(r, true);
  for (auto& s : r.seqs) ForgetDraft(s->id);
  for (auto& s : r.seqs) seq_owner_.erase(s->id);
  requests_.erase(it);
}

bool EngineCore::HasWork() const { return !requests_.empty(); }

RequestOutput EngineCore::BuildOutput(Request& r, bool final) {
  RequestOutput out;
  out.request_id = r.id;
  out.finished = final;
  out.metrics = r.metrics;
  if (final) out.prompt_token_ids = r.prompt;
  auto& list = r.beam ? (r.seqs.empty() ? r.done_beams : r.seqs) : r.seqs;
  std::vector<Seq*> ordered;
  for (auto& s : list) ordered.push_back(s.get());
  std::sort(ordered.begin(), ordered.end(),
            [](const Seq* a, const Seq* b) { return a->index < b->index; });
  for (Seq* s : ordered) {
    CompletionOutput c;
    c.index = s->index;
    if (final) {
      c.token_ids.assign(s->tokens.begin() + static_cast<long>(r.prompt.size()), s->tokens.end());
      c.text = r.beam ? tok_->Decode(c.token_ids, !r.params.skip_special_tokens) : s->stop->text();
      c.finish_reason =
          s->finish_reason.empty() ? FinishReasonName(FinishReason::kAbort) : s->finish_reason;
      if (!r.beam) c.stop_string = s->stop->matched_stop();
      c.cumulative_logprob = s->cum_logprob;
      c.token_logprobs = s->token_logprobs;
      c.top_logprobs = s->top_logprobs;
    }
    out.delta_text.push_back(std::move(s->delta_text));
    out.delta_token_ids.push_back(std::move(s->delta_ids));
    s->delta_text.clear();
    s->delta_ids.clear();
    out.outputs.push_back(std::move(c));
  }
  return out;
}

void EngineCore::Emit(Request& r, bool final) {
  if (!r.cb) return;
  if (!final && r.beam) return;  // beams stream nothing until the best are known
  RequestOutput out = BuildOutput(r, final);
  r.cb(out);
}

EngineStats EngineCore::Stats() const {
  EngineStats s;
  const sched::SchedulerStats ss = sched_->Stats();
  s.num_running = ss.num_running;
  s.num_waiting = ss.num_waiting;
  s.num_swapped = ss.num_swapped;
  s.num_preemptions = ss.num_preemptions;
  s.prefix_deferrals = ss.num_prefix_deferrals;
  s.itl_limited_steps = ss.num_itl_limited_steps;
  s.ttft_lifted_steps = ss.num_ttft_lifted_steps;
  s.kv_compactions = kv_compactions_;
  s.kv_policies = kv_policy_counts_;
  s.kv_shared_blocks = cache_->manager().pool().num_shared_blocks();
  s.spec_method = ConfigName(spec_ ? spec_->method() : SpeculativeMethod::kOff);
  s.spec_num_drafts = spec_num_drafts_;
  s.spec_draft_tokens = spec_draft_tokens_;
  s.spec_accepted_tokens = spec_accepted_tokens_;
  s.spec_accepted_per_pos = spec_accepted_per_pos_;
  s.spec_granted_slots = ss.num_draft_slots;
  s.spec_refused_offers = ss.num_drafts_refused;
  s.spec_draft_kv_bytes = spec_ ? spec_->draft_kv_bytes() : 0;
  s.kv_usage = cache_->Usage();
  s.kv_total_blocks = cache_->num_blocks();
  s.kv_block_tokens = cache_->block_tokens();
  s.kv_bytes = cache_->store().total_bytes();
  s.reserved_slots = (cache_->num_blocks() - cache_->num_free_blocks()) * cache_->block_tokens();
  s.live_tokens = cache_->LiveTokens();
  s.prompt_tokens_total = prompt_tokens_total_;
  s.generation_tokens_total = generation_tokens_total_;
  s.steps = steps_;
  if (const kvmeta::PrefixCache* pc = cache_->prefix_cache()) {
    const kvmeta::PrefixCacheStats ps = pc->stats();
    s.prefix_caching = true;
    s.prefix_cache_queries = ps.queries;
    s.prefix_cache_query_tokens = ps.query_tokens;
    s.prefix_cache_hit_tokens = ps.hit_tokens;
    s.prefix_cache_evicted_blocks = ps.evicted_blocks;
    s.prefix_cache_blocks = ps.cached_blocks;
  }
  if (offload_) {
    const engine::KvOffloadStats os = offload_->stats();
    s.kv_offload = true;
    s.kv_offload_loaded_tokens = os.loaded_tokens;
    s.kv_offload_loaded_chunks = os.loaded_chunks;
    s.kv_offload_stored_chunks = os.stored_chunks;
    s.kv_offload_rejected_chunks = os.rejected_chunks;
    s.kv_offload_dropped_writes = os.dropped_writes;
    s.kv_offload_load_timeouts = os.load_timeouts;
    s.kv_offload_prefetches = os.prefetches;
    s.kv_offload_deferred_chunks = offload_->deferred_chunks();
    s.kv_offload_load_waits = ss.num_prefix_load_waits;
    s.kv_tiers = os.tiers;
  }
  return s;
}

}  // namespace kvforge
