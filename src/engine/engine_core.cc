#include "engine/engine_core.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "assets/default_model.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/token_ids.h"
#include "engine/kv_budget.h"
#include "engine/kv_calibrate.h"
#include "engine/kv_options.h"
#include "gguf/gguf_reader.h"
#include "kvforge/config_names.h"

namespace kvforge {

using base::StrFormat;

namespace {

// How long an idle Step waits for tier loads before it returns to its caller.
constexpr std::chrono::milliseconds kIdleLoadWait{20};

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// log-softmax of a logits row.
std::vector<float> LogSoftmax(const float* logits, int64_t n) {
  float mx = logits[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = logits[i] - lse;
  return out;
}

}  // namespace

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
  if (e->offload_) KVF_LOG_INFO("%s", e->offload_->Describe().c_str());
  return e;
}

std::unique_ptr<EngineCore::Seq> EngineCore::NewSeq(const Request& r, int32_t index) {
  auto s = std::make_unique<Seq>();
  s->id = next_seq_id_++;
  s->index = index;
  s->tokens = r.prompt;
  SamplingParams p = r.params;
  if (p.seed != 0xFFFFFFFFull)
    p.seed += static_cast<uint64_t>(index);  // distinct streams for n > 1
  s->sampler = std::make_unique<sampling::Sampler>(p);
  s->stop = std::make_unique<engine::StopChecker>(*tok_, r.params);
  s->evict = engine::MakeSeqEviction(r.params.kv_policy.value_or(cfg_.kv_policy),
                                     static_cast<int64_t>(r.prompt.size()),
                                     static_cast<int32_t>(model_->config().n_layer), *cache_);
  if (r.grammar) s->grammar.emplace(r.grammar, r.end_tokens, r.params.structured_outputs);
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

EngineCore::Seq* EngineCore::FindSeq(Request& r, int64_t seq) {
  for (auto& s : r.seqs)  // entries may be empty while beams are being reshuffled
    if (s != nullptr && s->id == seq) return s.get();
  return nullptr;
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
  for (auto& s : r.seqs) seq_owner_.erase(s->id);
  requests_.erase(it);
}

bool EngineCore::HasWork() const { return !requests_.empty(); }

int32_t EngineCore::SampleToken(Seq& s, float* logits) {
  const int64_t n_vocab = model_->config().n_vocab;
  if (s.grammar && !s.grammar->Mask(logits, n_vocab)) return -1;
  return s.sampler->Sample(logits, n_vocab, s.tokens);
}

void EngineCore::FinishSeq(Seq& s, FinishReason reason) {
  s.finished = true;
  s.finish_reason = FinishReasonName(reason);
  s.delta_text += s.stop->Flush();
}

void EngineCore::AppendToken(Request& r, Seq& s, int32_t token, const float* raw_logits) {
  if (token < 0) {
    FinishSeq(s, FinishReason::kStop);
    return;
  }
  const int64_t n_vocab = model_->config().n_vocab;
  float lp = 0;
  if (r.params.logprobs > 0) {
    std::vector<sampling::TokenLogprob> top;
    lp = sampling::Sampler::LogProb(raw_logits, n_vocab, token, &top, r.params.logprobs);
    s.token_logprobs.push_back(lp);
    std::vector<std::pair<int32_t, float>> alts;
    for (const auto& t : top) alts.emplace_back(t.id, t.logprob);
    s.top_logprobs.push_back(std::move(alts));
  }
  s.cum_logprob += lp;
  engine::TokenOutcome out = s.stop->Accept(token, static_cast<int32_t>(s.n_generated));
  if (out.keep_token) {
    s.tokens.push_back(token);
    s.n_generated++;
    s.delta_ids.push_back(token);
    generation_tokens_total_++;
    r.metrics.generated_tokens++;
  }
  s.delta_text += out.text;
  if (out.finished) {
    s.finished = true;
    s.finish_reason = FinishReasonName(out.reason);
    return;
  }
  if (s.grammar && out.keep_token) {
    s.grammar->Accept(token);
    // A complete sentence that allows nothing more ends now, not one forward pass later.
    if (s.grammar->MustEnd()) FinishSeq(s, FinishReason::kStop);
  }
}

Status EngineCore::Step() {
  const auto step_start = Clock::now();
  sched::StepPlan plan = sched_->Schedule();
  for (int64_t id : plan.preempted)
    if (auto it = requests_.find(id); it != requests_.end()) it->second->metrics.num_preemptions++;
  if (plan.empty()) {
    // Nothing to step but requests whose KV is on its way from the tiers: wait for the loader
    // (bounded, so new requests and aborts are still seen) rather than spin.
    if (offload_ && offload_->loads_pending()) offload_->WaitForLoads(kIdleLoadWait);
    return Status::Ok();
  }
  ++steps_;
  const auto now = Clock::now();
  model::Batch batch;
  std::vector<const sched::ScheduledChunk*> sampled;
  for (const auto& ch : plan.chunks) {
    auto ow = seq_owner_.find(ch.seq);
    if (ow == seq_owner_.end()) return Status::Internal("scheduled an unknown sequence");
    Request& r = *requests_.at(ow->second);
    if (!r.scheduled_once) {
      r.scheduled_once = true;
      r.first_scheduled = now;
      r.metrics.queue_ms = Ms(now - r.arrival);
      r.metrics.cached_tokens = std::max<int64_t>(0, sched_->NumCachedTokens(r.id));
    }
    Seq* s = FindSeq(r, ch.seq);
    if (s == nullptr || ch.pos0 + ch.num_tokens > static_cast<int64_t>(s->tokens.size()))
      return Status::Internal("scheduled tokens the sequence does not have");
    const int64_t begin = static_cast<int64_t>(batch.tokens.size());
    batch.tokens.insert(batch.tokens.end(), s->tokens.begin() + ch.pos0,
                        s->tokens.begin() + ch.pos0 + ch.num_tokens);
    batch.seqs.push_back({ch.seq, ch.pos0, begin, ch.num_tokens, false, ch.sample});
    if (s->evict) s->evict->PrepareChunk(*cache_, ch.pos0, &batch.seqs.back());
    if (ch.is_prefill) prompt_tokens_total_ += ch.num_tokens;
    if (ch.sample) sampled.push_back(&ch);
  }
  KVF_RETURN_IF_ERROR(model_->Forward(batch, *cache_, ws_, *pool_, &logits_));
  KVF_RETURN_IF_ERROR(ApplyKvPolicies(plan));
  const int64_t n_vocab = model_->config().n_vocab;

  std::vector<sched::SeqOutcome> seq_out;
  std::vector<int64_t> touched;
  std::vector<int64_t> drops;  // finished sequences whose siblings go on (n > 1): free their blocks
  std::vector<int64_t> beam_requests;
  for (size_t i = 0; i < sampled.size(); ++i) {
    const sched::ScheduledChunk& ch = *sampled[i];
    Request& r = *requests_.at(seq_owner_.at(ch.seq));
    float* row = logits_.data() + static_cast<int64_t>(i) * n_vocab;
    if (std::find(touched.begin(), touched.end(), r.id) == touched.end()) touched.push_back(r.id);
    const Clock::time_point t = Clock::now();
    if (!r.got_token) {
      r.got_token = true;
      r.first_token = t;
      r.metrics.ttft_ms = Ms(t - r.arrival);
    } else if (ch.seq == r.seqs.front()->id) {
      r.metrics.itl_ms.push_back(Ms(t - r.last_token));
    }
    if (ch.seq == r.seqs.front()->id) r.last_token = t;
    if (r.beam) {
      Seq* s = FindSeq(r, ch.seq);
      sampling::Sampler::ApplyLogitBias(r.params, row, n_vocab);
      if (s->grammar && !s->grammar->Mask(row, n_vocab)) {
        // A dead end: the beam may only end (its EOS candidate closes the hypothesis).
        row[tok_->eos() >= 0 && tok_->eos() < n_vocab ? tok_->eos() : 0] = 0.0f;
      }
      s->pending_logprobs = LogSoftmax(row, n_vocab);
      if (std::find(beam_requests.begin(), beam_requests.end(), r.id) == beam_requests.end())
        beam_requests.push_back(r.id);
      continue;
    }
    Seq* s = FindSeq(r, ch.seq);
    if (!r.forked && r.params.n > 1) {
      // The prompt is done: n completions share its blocks; each samples from the same logits.
      r.forked = true;
      std::vector<float> raw(row, row + n_vocab);
      for (int32_t k = 1; k < r.params.n; ++k) {
        auto child = NewSeq(r, k);
        KVF_RETURN_IF_ERROR(sched_->ForkSequence(r.id, s->id, child->id));
        if (s->evict) child->evict = std::make_unique<engine::SeqEviction>(*s->evict);
        std::vector<float> l = raw;
        const int32_t tok = SampleToken(*child, l.data());
        AppendToken(r, *child, tok, raw.data());
        seq_out.push_back({child->id, child->n_generated > 0});
        if (child->finished) drops.push_back(child->id);
        r.seqs.push_back(std::move(child));
      }
    }
    std::vector<float> raw;
    if (r.params.logprobs > 0) raw.assign(row, row + n_vocab);
    const int32_t tok = SampleToken(*s, row);
    const size_t before = s->tokens.size();
    AppendToken(r, *s, tok, raw.empty() ? row : raw.data());
    seq_out.push_back({s->id, s->tokens.size() > before});
    if (s->finished) drops.push_back(s->id);
  }
  for (int64_t rid : beam_requests) KVF_RETURN_IF_ERROR(ProcessBeams(*requests_.at(rid), &seq_out));

  std::vector<sched::RequestOutcome> req_out;
  for (int64_t rid : touched) {
    Request& r = *requests_.at(rid);
    bool all = true;
    for (auto& s : r.seqs) all = all && s->finished;
    if (r.beam) all = r.seqs.empty();
    req_out.push_back({rid, all});
  }
  KVF_RETURN_IF_ERROR(sched_->OnStepDone(plan, seq_out, req_out));
  for (const auto& ro : req_out) {
    Request& r = *requests_.at(ro.request);
    if (!ro.finished) {
      for (int64_t sid : drops)
        if (seq_owner_.count(sid) && seq_owner_.at(sid) == r.id && r.seqs.size() > 1)
          (void)sched_->DropSequence(r.id, sid);
      Emit(r, false);
      continue;
    }
    r.metrics.e2e_ms = Ms(Clock::now() - r.arrival);
    Emit(r, true);
    for (auto& s : r.seqs) seq_owner_.erase(s->id);
    for (auto& s : r.done_beams) seq_owner_.erase(s->id);
    requests_.erase(ro.request);
  }
  // KV memory utilization: tokens held by sequences / slots in the blocks they hold.
  const int64_t used = cache_->num_blocks() - cache_->num_free_blocks();
  peak_used_blocks_ = std::max(peak_used_blocks_, used);
  if (used > 0) {
    const int64_t live = cache_->LiveTokens();
    int64_t unshared = 0;  // blocks the sequences would hold if nothing were shared
    const int64_t bt = cache_->block_tokens();
    for (const auto& [id, r] : requests_)
      for (const auto& s : r->seqs) {
        if (s->finished || !cache_->Contains(s->id)) continue;
        unshared += (cache_->NumTokens(s->id) + bt - 1) / bt;
      }
    util_sum_ += static_cast<double>(live) / static_cast<double>(used * bt);
    ++util_steps_;
    if (unshared > 0) {
      share_sum_ += 1.0 - static_cast<double>(used) / static_cast<double>(unshared);
      ++share_steps_;
      peak_unshared_blocks_ = std::max(peak_unshared_blocks_, unshared);
    }
  }
  // What the step cost, from planning to the last emitted token: decode-priority chunking's input.
  sched_->ObserveStepCost(plan, Ms(Clock::now() - step_start));
  return Status::Ok();
}

Status EngineCore::ApplyKvPolicies(const sched::StepPlan& plan) {
  // Before sampling, so that n > 1 completions fork the compacted prompt.
  for (const auto& ch : plan.chunks) {
    auto ow = seq_owner_.find(ch.seq);
    Request& r = *requests_.at(ow->second);
    Seq* s = FindSeq(r, ch.seq);
    if (s == nullptr || !s->evict) continue;
    KVF_ASSIGN_OR_RETURN(bool compacted,
                         s->evict->AfterStep(*cache_, ch.seq, ch.pos0 + ch.num_tokens));
    if (compacted) ++kv_compactions_;
    if (s->index == 0) {
      r.metrics.kv_evicted_tokens = s->evict->evicted_tokens();
      r.metrics.kv_peak_tokens = s->evict->peak_slots();
      r.metrics.kv_final_tokens = cache_->NumTokens(ch.seq);
    }
  }
  return Status::Ok();
}

Status EngineCore::ProcessBeams(Request& r, std::vector<sched::SeqOutcome>* outcomes) {
  // Wait until every live beam has its next-token distribution (they normally all run together).
  for (auto& s : r.seqs)
    if (s->pending_logprobs.empty()) return Status::Ok();
  const int32_t width = r.params.beam_width;
  const int64_t n_vocab = model_->config().n_vocab;
  struct Cand {
    size_t parent;
    int32_t token;
    double score;
  };
  std::vector<Cand> cands;
  const size_t per_beam = static_cast<size_t>(2 * width);
  for (size_t b = 0; b < r.seqs.size(); ++b) {
    const std::vector<float>& lp = r.seqs[b]->pending_logprobs;
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int64_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    const size_t k = std::min(per_beam, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(k), ids.end(),
                      [&](int32_t a, int32_t c) {
                        return lp[static_cast<size_t>(a)] > lp[static_cast<size_t>(c)] ||
                               (lp[static_cast<size_t>(a)] == lp[static_cast<size_t>(c)] && a < c);
                      });
    for (size_t i = 0; i < k; ++i) {
      // Tokens a grammar or logit_bias refused (-inf) are never candidates.
      const float l = lp[static_cast<size_t>(ids[i])];
      if (l > -std::numeric_limits<float>::infinity())
        cands.push_back({b, ids[i], r.seqs[b]->cum_logprob + l});
    }
    if (!r.forked) break;  // first step: all beams would be identical, expand only the prompt
  }
  r.forked = true;
  std::stable_sort(cands.begin(), cands.end(),
                   [](const Cand& a, const Cand& b) { return a.score > b.score; });
  auto normalized = [&](double cum, int64_t len) {
    return cum / std::pow(static_cast<double>(std::max<int64_t>(1, len)), r.params.length_penalty);
  };
  std::vector<Cand> next;
  for (const Cand& c : cands) {
    if (static_cast<int32_t>(next.size()) >= width) break;
    Seq& parent = *r.seqs[c.parent];
    if (parent.stop->IsEndToken(c.token)) {
      // A finished hypothesis (the EOS itself is not part of the output).
      auto done = CloneSeq(r, parent, static_cast<int32_t>(r.done_beams.size()));
      seq_owner_.erase(done->id);
      done->cum_logprob = c.score;
      done->finished = true;
      done->finish_reason = FinishReasonName(FinishReason::kStop);
      r.done_beams.push_back(std::move(done));
      continue;
    }
    next.push_back(c);
  }
  // Stop when enough hypotheses are done and none of the live beams can beat the worst of them.
  bool stop = next.empty();
  if (!stop && static_cast<int32_t>(r.done_beams.size()) >= width) {
    double worst = 1e300;
    std::vector<double> scores;
    for (auto& d : r.done_beams) scores.push_back(normalized(d->cum_logprob, d->n_generated));
    std::sort(scores.rbegin(), scores.rend());
    worst = scores[static_cast<size_t>(width - 1)];
    double best_live = -1e300;
    for (const Cand& c : next)
      best_live = std::max(best_live, normalized(c.score, r.seqs[c.parent]->n_generated + 1));
    stop = best_live <= worst;
  }
  // Build the new beam set: the first use of a parent keeps its sequence (and blocks), later uses
  // fork it; parents not chosen are dropped and their blocks freed.
  std::vector<std::unique_ptr<Seq>> new_seqs;
  std::vector<bool> parent_used(r.seqs.size(), false);
  std::vector<std::pair<Seq*, int32_t>> appends;
  if (!stop) {
    // Forks first (they copy the parent's state before it changes).
    std::vector<std::unique_ptr<Seq>> forks;
    std::vector<bool> claimed(r.seqs.size(), false);
    for (const Cand& c : next) {
      if (!claimed[c.parent]) {
        claimed[c.parent] = true;
        continue;
      }
      auto child = CloneSeq(r, *r.seqs[c.parent], 0);
      KVF_RETURN_IF_ERROR(sched_->ForkSequence(r.id, r.seqs[c.parent]->id, child->id));
      child->cum_logprob = c.score;
      appends.emplace_back(child.get(), c.token);
      forks.push_back(std::move(child));
    }
    std::fill(claimed.begin(), claimed.end(), false);
    for (const Cand& c : next) {
      if (claimed[c.parent]) continue;
      claimed[c.parent] = true;
      parent_used[c.parent] = true;
      r.seqs[c.parent]->cum_logprob = c.score;
      appends.emplace_back(r.seqs[c.parent].get(), c.token);
    }
    for (size_t b = 0; b < r.seqs.size(); ++b) {
      if (parent_used[b]) {
        new_seqs.push_back(std::move(r.seqs[b]));
      } else {
        KVF_RETURN_IF_ERROR(sched_->DropSequence(r.id, r.seqs[b]->id));
        seq_owner_.erase(r.seqs[b]->id);
      }
    }
    for (auto& f : forks) new_seqs.push_back(std::move(f));
    r.seqs = std::move(new_seqs);
    for (auto& [s, token] : appends) {
      if (s->grammar) s->grammar->Accept(token);
      s->tokens.push_back(token);
      s->n_generated++;
      s->pending_logprobs.clear();
      generation_tokens_total_++;
      r.metrics.generated_tokens++;
      outcomes->push_back({s->id, true});
    }
    for (auto& s : r.seqs) s->pending_logprobs.clear();
    // Length limit: every beam grows by one per step, so all hit max_tokens together.
    if (!r.seqs.empty() && r.seqs.front()->n_generated >= r.params.max_tokens) stop = true;
  }
  if (stop) FinishBeamRequest(r);
  return Status::Ok();
}

void EngineCore::FinishBeamRequest(Request& r) {
  auto normalized = [&](const Seq& s) {
    return s.cum_logprob / std::pow(static_cast<double>(std::max<int64_t>(1, s.n_generated)),
                                    r.params.length_penalty);
  };
  for (auto& s : r.seqs) {
    if (!s->finished) {
      s->finished = true;
      s->finish_reason = FinishReasonName(
          s->n_generated >= r.params.max_tokens ? FinishReason::kLength : FinishReason::kStop);
    }
    seq_owner_.erase(s->id);
    r.done_beams.push_back(std::move(s));
  }
  r.seqs.clear();
  std::stable_sort(r.done_beams.begin(), r.done_beams.end(),
                   [&](const auto& a, const auto& b) { return normalized(*a) > normalized(*b); });
  if (static_cast<int32_t>(r.done_beams.size()) > r.params.n)
    r.done_beams.resize(static_cast<size_t>(r.params.n));
  for (size_t i = 0; i < r.done_beams.size(); ++i) r.done_beams[i]->index = static_cast<int32_t>(i);
}

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
  s.kv_compactions = kv_compactions_;
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
