// engine_step.cc — EngineCore::Step as named stages (engine_core.h): BuildBatch -> RunForward ->
// ChooseTokens -> CommitStep -> RecordStepMetrics. Nothing before CommitStep changes a request,
// the scheduler's bookkeeping or a statistic; a failure there leaves the plan uncommitted, and
// the scheduler schedules the same positions again.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/engine_core.h"
#include "sampling/speculative.h"
#include "spec/ngram_drafter.h"

namespace kvforge {

namespace {

// How long an idle Step waits for tier loads before it returns to its caller.
constexpr std::chrono::milliseconds kIdleLoadWait{20};

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// log-softmax of a logits row [n].
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

const char* StageName(EngineCore::StepStage s) {
  static constexpr const char* kNames[] = {"build batch", "forward", "choose tokens"};
  return kNames[static_cast<int>(s)];
}

}  // namespace

Status EngineCore::InjectedFault(StepStage after) {
  if (injected_fault_ != after) return Status::Ok();
  injected_fault_.reset();
  return Status::Internal(std::string("injected fault after the step's ") + StageName(after));
}

Status EngineCore::Step() {
  const auto step_start = Clock::now();
  OfferDrafts();
  sched::StepPlan plan = sched_->Schedule();
  // The scheduler has preempted these already (its own state, whatever this step does).
  for (int64_t id : plan.preempted)
    if (auto it = requests_.find(id); it != requests_.end()) it->second->metrics.num_preemptions++;
  if (plan.empty()) {
    // Nothing to step but requests whose KV is on its way from the tiers: wait for the loader
    // (bounded, so new requests and aborts are still seen) rather than spin.
    if (offload_ && offload_->loads_pending()) offload_->WaitForLoads(kIdleLoadWait);
    return Status::Ok();
  }
  // KV policies observe the forward (attention scores): a step that fails before its commit
  // puts their state back, with everything else it did not change.
  std::vector<std::pair<Seq*, std::unique_ptr<engine::SeqEviction>>> policies = SavePolicies(plan);
  auto undo = [&](Status st) {
    for (auto& [seq, saved] : policies) seq->evict = std::move(saved);
    return st;
  };
  Result<StepDrafts> drafts = DraftTokens(plan);
  if (!drafts.ok()) return undo(drafts.error());
  Result<StepBatch> batch = BuildBatch(plan, std::move(*drafts));
  if (!batch.ok()) return undo(batch.error());
  if (Status st = InjectedFault(StepStage::kBuildBatch); !st.ok()) return undo(st);
  if (Status st = RunForward(*batch); !st.ok()) return undo(st);
  if (Status st = InjectedFault(StepStage::kForward); !st.ok()) return undo(st);
  Result<StepChoices> choices = ChooseTokens(*batch);
  if (!choices.ok()) return undo(choices.error());
  KVF_RETURN_IF_ERROR(CommitStep(plan, *batch, std::move(*choices)));
  RecordStepMetrics(plan, step_start);
  return Status::Ok();
}

std::vector<std::pair<EngineCore::Seq*, std::unique_ptr<engine::SeqEviction>>>
EngineCore::SavePolicies(const sched::StepPlan& plan) {
  std::vector<std::pair<Seq*, std::unique_ptr<engine::SeqEviction>>> saved;
  for (const auto& ch : plan.chunks) {
    auto ow = seq_owner_.find(ch.seq);
    if (ow == seq_owner_.end()) continue;
    Seq* s = FindSeq(*requests_.at(ow->second), ch.seq);
    if (s != nullptr && s->evict)
      saved.emplace_back(s, std::make_unique<engine::SeqEviction>(*s->evict));
  }
  return saved;
}

// --- drafts -----------------------------------------------------------------------------------

bool EngineCore::MaySpeculate(const Request& r, const Seq& s) const {
  return !r.beam && !s.finished && (!s.evict || s.evict->AllowsDrafts());
}

void EngineCore::OfferDrafts() {
  if (!spec_) return;
  for (auto& [id, rp] : requests_) {
    Request& r = *rp;
    for (auto& sp : r.seqs) {
      Seq& s = *sp;
      s.ngram_draft.clear();
      // Only a sequence about to decode (its last token is the only one not computed).
      if (!MaySpeculate(r, s) ||
          sched_->NumComputed(s.id) != static_cast<int64_t>(s.tokens.size()) - 1)
        continue;
      const int32_t k = engine::DraftLength(s.draft, spec_->max_drafts(), spec_->adaptive());
      if (k <= 0) continue;
      int64_t offer = k;
      if (spec_->method() == SpeculativeMethod::kNgram) {
        s.ngram_draft = spec::ProposeNgram(s.tokens, spec_->lookup_min(), spec_->lookup_max(), k);
        offer = static_cast<int64_t>(s.ngram_draft.size());
      }
      // Not adaptive: drafts are worth their cost by decree, as if every one were kept.
      sched_->OfferDrafts(s.id, offer, spec_->adaptive() ? s.draft.acceptance : 1.0,
                          spec_->adaptive() ? draft_round_ms_ : 0.0);
    }
  }
}

Result<EngineCore::StepDrafts> EngineCore::DraftTokens(const sched::StepPlan& plan) {
  StepDrafts out;
  if (!spec_) return out;
  std::vector<spec::DraftAsk> asks;
  for (const auto& ch : plan.chunks) {
    if (ch.draft_tokens <= 0) continue;
    auto ow = seq_owner_.find(ch.seq);
    if (ow == seq_owner_.end()) return Status::Internal("draft slots for an unknown sequence");
    Request& r = *requests_.at(ow->second);
    Seq* s = FindSeq(r, ch.seq);
    if (s == nullptr) return Status::Internal("draft slots for an unknown sequence");
    if (spec_->method() == SpeculativeMethod::kNgram) {
      spec::Draft d;
      const size_t n = std::min(s->ngram_draft.size(), static_cast<size_t>(ch.draft_tokens));
      d.tokens.assign(s->ngram_draft.begin(), s->ngram_draft.begin() + static_cast<long>(n));
      out.by_seq[ch.seq] = std::move(d);
    } else {
      asks.push_back({ch.seq, &s->tokens, static_cast<int32_t>(ch.draft_tokens), &r.params});
    }
  }
  if (asks.empty()) return out;
  const auto t0 = Clock::now();
  KVF_ASSIGN_OR_RETURN(std::vector<spec::Draft> drafts,
                       spec_->draft_model()->Propose(asks, *pool_));
  // What one more draft position costs: a forward of the draft model (over every sequence
  // asked), the scheduler's input for the next offers.
  int32_t rounds = 1;
  for (const spec::DraftAsk& a : asks) rounds = std::max(rounds, a.k);
  const double round_ms = Ms(Clock::now() - t0) / rounds;
  draft_round_ms_ = draft_round_ms_ == 0 ? round_ms : 0.8 * draft_round_ms_ + 0.2 * round_ms;
  for (size_t i = 0; i < asks.size(); ++i) out.by_seq[asks[i].seq] = std::move(drafts[i]);
  return out;
}

// --- build batch ------------------------------------------------------------------------------

Result<EngineCore::StepBatch> EngineCore::BuildBatch(const sched::StepPlan& plan,
                                                     StepDrafts drafts) const {
  StepBatch b;
  b.planned_at = Clock::now();
  int64_t rows = 0;  // logits rows so far
  for (const auto& ch : plan.chunks) {
    auto ow = seq_owner_.find(ch.seq);
    if (ow == seq_owner_.end()) return Status::Internal("scheduled an unknown sequence");
    const Request& r = *requests_.at(ow->second);
    const Seq* s = FindSeq(r, ch.seq);
    const int64_t known = ch.num_tokens - ch.draft_tokens;  // tokens the sequence has
    if (s == nullptr || ch.pos0 + known > static_cast<int64_t>(s->tokens.size()))
      return Status::Internal("scheduled tokens the sequence does not have");
    spec::Draft draft;
    if (auto it = drafts.by_seq.find(ch.seq); ch.draft_tokens > 0 && it != drafts.by_seq.end()) {
      draft = std::move(it->second);
      if (static_cast<int64_t>(draft.tokens.size()) > ch.draft_tokens) {
        draft.tokens.resize(static_cast<size_t>(ch.draft_tokens));
        if (!draft.q.empty()) draft.q.resize(draft.tokens.size());
      }
    }
    const int64_t n_drafts = static_cast<int64_t>(draft.tokens.size());
    const int64_t begin = static_cast<int64_t>(b.batch.tokens.size());
    b.batch.tokens.insert(b.batch.tokens.end(), s->tokens.begin() + ch.pos0,
                          s->tokens.begin() + ch.pos0 + known);
    b.batch.tokens.insert(b.batch.tokens.end(), draft.tokens.begin(), draft.tokens.end());
    // A verify chunk needs the logits of every position: the last token's and each draft's.
    b.batch.seqs.push_back({ch.seq, ch.pos0, begin, known + n_drafts, n_drafts > 0, ch.sample});
    model::SeqChunk& chunk = b.batch.seqs.back();
    if (s->evict) s->evict->PrepareChunk(*cache_, ch.pos0, &chunk);
    if (ch.is_prefill) b.prefill_tokens += ch.num_tokens;
    if (ch.sample) {
      b.sampled.push_back(
          {r.id, ch.seq, rows, chunk.first_slot(), std::move(draft.tokens), std::move(draft.q)});
      rows += 1 + n_drafts;
    }
  }
  return b;
}

// --- forward ----------------------------------------------------------------------------------

Status EngineCore::RunForward(StepBatch& b) {
  // Writes KV only into the slots the (uncommitted) plan holds; logits_ [sampled rows][n_vocab].
  return model_->Forward(b.batch, *cache_, ws_, *pool_, &logits_);
}

// --- choose tokens ----------------------------------------------------------------------------

void EngineCore::AddLogprobs(const Request& r, const std::vector<float>& raw,
                             TokenChoice* c) const {
  if (c->token < 0 || r.params.logprobs <= 0) return;
  std::vector<sampling::TokenLogprob> top;
  c->logprob = sampling::Sampler::LogProb(raw.data(), model_->config().n_vocab, c->token, &top,
                                          r.params.logprobs);
  for (const auto& t : top) c->top.emplace_back(t.id, t.logprob);
}

EngineCore::TokenChoice EngineCore::ChooseToken(const Request& r, int64_t seq,
                                                sampling::Sampler& sampler,
                                                std::optional<engine::SequenceGrammar>& grammar,
                                                const std::vector<int32_t>& history,
                                                float* logits) const {
  const int64_t n_vocab = model_->config().n_vocab;
  TokenChoice c;
  c.seq = seq;
  std::vector<float> raw;  // [n_vocab] before masking, for the logprobs
  if (r.params.logprobs > 0) raw.assign(logits, logits + n_vocab);
  if (!grammar || grammar->Mask(logits, n_vocab))
    c.token = sampler.Sample(logits, n_vocab, history);
  AddLogprobs(r, raw, &c);
  return c;
}

Result<EngineCore::StepChoices> EngineCore::ChooseTokens(const StepBatch& b) {
  const int64_t n_vocab = model_->config().n_vocab;
  StepChoices out;
  // The draws below advance the samplers' streams; a failure before the commit puts them back.
  std::vector<std::pair<sampling::Sampler*, std::mt19937_64>> drawn;
  std::vector<int64_t> beam_requests;
  std::vector<std::pair<int64_t, std::vector<float>>> beam_rows;  // seq -> log-softmax [n_vocab]
  for (size_t i = 0; i < b.sampled.size(); ++i) {
    Request& r = *requests_.at(b.sampled[i].request);
    Seq& s = *FindSeq(r, b.sampled[i].seq);
    float* row = logits_.data() + b.sampled[i].first_row * n_vocab;  // [rows][n_vocab]
    if (!b.sampled[i].drafts.empty()) {
      drawn.emplace_back(s.sampler.get(), s.sampler->rng());
      out.rows.push_back(VerifyDrafts(r, s, b.sampled[i], row));
      continue;
    }
    if (r.beam) {
      sampling::Sampler::ApplyLogitBias(r.params, row, n_vocab);
      if (s.grammar && !s.grammar->Mask(row, n_vocab)) {
        // A dead end: the beam may only end (its EOS candidate closes the hypothesis).
        row[tok_->eos() >= 0 && tok_->eos() < n_vocab ? tok_->eos() : 0] = 0.0f;
      }
      beam_rows.emplace_back(s.id, LogSoftmax(row, n_vocab));
      if (std::find(beam_requests.begin(), beam_requests.end(), r.id) == beam_requests.end())
        beam_requests.push_back(r.id);
      continue;
    }
    RowChoice rc;
    rc.request = r.id;
    if (!r.forked && r.params.n > 1) {
      // The prompt is done: n completions will share its blocks; each samples the same logits.
      const std::vector<float> raw(row, row + n_vocab);
      for (int32_t k = 1; k < r.params.n; ++k) {
        ForkChoice f;
        f.index = k;
        f.sampler = SamplerFor(r, k);
        std::optional<engine::SequenceGrammar> grammar = GrammarFor(r);
        std::vector<float> l = raw;
        f.choice = ChooseToken(r, 0, *f.sampler, grammar, r.prompt, l.data());
        rc.forks.push_back(std::move(f));
      }
    }
    drawn.emplace_back(s.sampler.get(), s.sampler->rng());
    rc.choice = ChooseToken(r, s.id, *s.sampler, s.grammar, s.tokens, row);
    out.rows.push_back(std::move(rc));
  }
  for (int64_t rid : beam_requests) {
    const Request& r = *requests_.at(rid);
    std::vector<const std::vector<float>*> lp;  // per live beam: this step's row, or kept
    for (const auto& s : r.seqs) {
      const std::vector<float>* row = s->pending_logprobs.empty() ? nullptr : &s->pending_logprobs;
      for (const auto& [seq, v] : beam_rows)
        if (seq == s->id) row = &v;
      lp.push_back(row);
    }
    const bool all = std::all_of(lp.begin(), lp.end(), [](const auto* p) { return p != nullptr; });
    BeamChoice bc;
    if (all) bc = DecideBeams(r, lp);
    bc.request = rid;
    bc.decided = all;
    for (auto& [seq, v] : beam_rows)
      if (seq_owner_.at(seq) == rid) bc.pending.emplace_back(seq, std::move(v));
    out.beams.push_back(std::move(bc));
  }
  if (Status s = InjectedFault(StepStage::kChooseTokens); !s.ok()) {
    for (auto& [sampler, rng] : drawn) sampler->set_rng(rng);
    return s;
  }
  return out;
}

EngineCore::RowChoice EngineCore::VerifyDrafts(const Request& r, Seq& s, const SampledRow& row,
                                               float* rows) const {
  const int64_t n_vocab = model_->config().n_vocab;
  RowChoice rc;
  rc.request = r.id;
  rc.drafted = static_cast<int64_t>(row.drafts.size());
  // The sequence as it would be with the drafts kept so far: its grammar state and penalty
  // history, so that p at each position is what plain decoding would have sampled from.
  std::optional<engine::SequenceGrammar> grammar = s.grammar;
  std::vector<int32_t> history = s.tokens;
  for (size_t i = 0; i <= row.drafts.size(); ++i) {
    float* logits = rows + static_cast<int64_t>(i) * n_vocab;  // [n_vocab]
    std::vector<float> raw;                                    // before masking, for the logprobs
    if (r.params.logprobs > 0) raw.assign(logits, logits + n_vocab);
    sampling::TokenDistribution p;
    if (!grammar || grammar->Mask(logits, n_vocab))
      p = s.sampler->Distribution(logits, n_vocab, history);
    TokenChoice c;
    c.seq = s.id;
    bool kept = false;
    if (i < row.drafts.size()) {
      const sampling::DraftVerdict v =
          sampling::VerifyDraft(*s.sampler, p, row.drafts[i], row.q.empty() ? nullptr : &row.q[i]);
      c.token = v.token;
      kept = v.accepted;
    } else {
      c.token = s.sampler->Draw(p);  // every draft kept: the target's own next token
    }
    AddLogprobs(r, raw, &c);
    if (!kept) {
      rc.choice = std::move(c);
      break;
    }
    history.push_back(c.token);
    if (grammar) grammar->Accept(c.token);
    rc.accepted.push_back(std::move(c));
  }
  return rc;
}

EngineCore::BeamChoice EngineCore::DecideBeams(
    const Request& r, const std::vector<const std::vector<float>*>& lp) const {
  const int32_t width = r.params.beam_width;
  const int64_t n_vocab = model_->config().n_vocab;
  std::vector<BeamCandidate> cands;
  const size_t per_beam = static_cast<size_t>(2 * width);
  for (size_t b = 0; b < r.seqs.size(); ++b) {
    const std::vector<float>& row = *lp[b];
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int64_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    const size_t k = std::min(per_beam, ids.size());
    std::partial_sort(
        ids.begin(), ids.begin() + static_cast<long>(k), ids.end(), [&](int32_t a, int32_t c) {
          return row[static_cast<size_t>(a)] > row[static_cast<size_t>(c)] ||
                 (row[static_cast<size_t>(a)] == row[static_cast<size_t>(c)] && a < c);
        });
    for (size_t i = 0; i < k; ++i) {
      // Tokens a grammar or logit_bias refused (-inf) are never candidates.
      const float l = row[static_cast<size_t>(ids[i])];
      if (l > -std::numeric_limits<float>::infinity())
        cands.push_back({b, ids[i], r.seqs[b]->cum_logprob + l});
    }
    if (!r.forked) break;  // first step: all beams would be identical, expand only the prompt
  }
  std::stable_sort(cands.begin(), cands.end(), [](const BeamCandidate& a, const BeamCandidate& b) {
    return a.score > b.score;
  });
  auto normalized = [&](double cum, int64_t len) {
    return cum / std::pow(static_cast<double>(std::max<int64_t>(1, len)), r.params.length_penalty);
  };
  BeamChoice c;
  for (const BeamCandidate& cand : cands) {
    if (static_cast<int32_t>(c.next.size()) >= width) break;
    // An end token closes a hypothesis (the EOS itself is not part of the output).
    (r.seqs[cand.parent]->stop->IsEndToken(cand.token) ? c.done : c.next).push_back(cand);
  }
  // Stop when enough hypotheses are done and none of the live beams can beat the worst of them.
  c.stop = c.next.empty();
  if (!c.stop && static_cast<int32_t>(r.done_beams.size() + c.done.size()) >= width) {
    std::vector<double> scores;
    for (const auto& d : r.done_beams) scores.push_back(normalized(d->cum_logprob, d->n_generated));
    for (const BeamCandidate& d : c.done)
      scores.push_back(normalized(d.score, r.seqs[d.parent]->n_generated));
    std::sort(scores.rbegin(), scores.rend());
    const double worst = scores[static_cast<size_t>(width - 1)];
    double best_live = -1e300;
    for (const BeamCandidate& n : c.next)
      best_live = std::max(best_live, normalized(n.score, r.seqs[n.parent]->n_generated + 1));
    c.stop = best_live <= worst;
  }
  return c;
}

// --- commit -----------------------------------------------------------------------------------

void EngineCore::NoteFirstSchedule(const sched::StepPlan& plan, Clock::time_point at) {
  for (const auto& ch : plan.chunks) {
    Request& r = *requests_.at(seq_owner_.at(ch.seq));
    if (r.scheduled_once) continue;
    r.scheduled_once = true;
    r.first_scheduled = at;
    r.metrics.queue_ms = Ms(at - r.arrival);
    r.metrics.cached_tokens = std::max<int64_t>(0, sched_->NumCachedTokens(r.id));
  }
}

void EngineCore::NoteTokenTimes(const StepBatch& b) {
  const Clock::time_point t = Clock::now();
  for (const SampledRow& row : b.sampled) {
    Request& r = *requests_.at(row.request);
    const bool first_seq = row.seq == r.seqs.front()->id;
    if (!r.got_token) {
      r.got_token = true;
      r.first_token = t;
      r.metrics.ttft_ms = Ms(t - r.arrival);
    } else if (first_seq) {
      r.metrics.itl_ms.push_back(Ms(t - r.last_token));
    }
    if (first_seq) r.last_token = t;
  }
}

void EngineCore::FinishSeq(Seq& s, FinishReason reason) {
  s.finished = true;
  s.finish_reason = FinishReasonName(reason);
  s.delta_text += s.stop->Flush();
}

void EngineCore::AppendToken(Request& r, Seq& s, const TokenChoice& c) {
  if (c.token < 0) {
    FinishSeq(s, FinishReason::kStop);
    return;
  }
  if (r.params.logprobs > 0) {
    s.token_logprobs.push_back(c.logprob);
    s.top_logprobs.push_back(c.top);
  }
  s.cum_logprob += c.logprob;
  engine::TokenOutcome out = s.stop->Accept(c.token, static_cast<int32_t>(s.n_generated));
  if (out.keep_token) {
    s.tokens.push_back(c.token);
    s.n_generated++;
    s.delta_ids.push_back(c.token);
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
    s.grammar->Accept(c.token);
    // A complete sentence that allows nothing more ends now, not one forward pass later.
    if (s.grammar->MustEnd()) FinishSeq(s, FinishReason::kStop);
  }
}

Status EngineCore::CommitStep(const sched::StepPlan& plan, const StepBatch& b, StepChoices c) {
  ++steps_;
  NoteFirstSchedule(plan, b.planned_at);
  prompt_tokens_total_ += b.prefill_tokens;
  std::unordered_map<int64_t, int64_t> kept_drafts;  // seq -> drafts verification kept
  for (const RowChoice& rc : c.rows)
    if (rc.drafted > 0) kept_drafts[rc.choice.seq] = static_cast<int64_t>(rc.accepted.size());
  KVF_RETURN_IF_ERROR(CutRejectedDrafts(b, kept_drafts));
  // Before the forks, so that n > 1 completions fork the compacted prompt.
  KVF_RETURN_IF_ERROR(ApplyKvPolicies(plan, kept_drafts));
  NoteTokenTimes(b);
  std::vector<sched::SeqOutcome> seq_out;
  std::vector<int64_t> touched;
  std::vector<int64_t> drops;  // finished sequences whose siblings go on (n > 1): free their blocks
  auto touch = [&](int64_t rid) {
    if (std::find(touched.begin(), touched.end(), rid) == touched.end()) touched.push_back(rid);
  };
  for (RowChoice& rc : c.rows) {
    Request& r = *requests_.at(rc.request);
    touch(r.id);
    Seq* s = FindSeq(r, rc.choice.seq);
    if (!rc.forks.empty()) r.forked = true;
    for (ForkChoice& f : rc.forks) {
      auto child = NewSeq(r, f.index, std::move(f.sampler));
      KVF_RETURN_IF_ERROR(sched_->ForkSequence(r.id, s->id, child->id));
      if (s->evict) child->evict = std::make_unique<engine::SeqEviction>(*s->evict);
      AppendToken(r, *child, f.choice);
      seq_out.push_back({child->id, child->n_generated > 0});
      if (child->finished) drops.push_back(child->id);
      r.seqs.push_back(std::move(child));
    }
    // Kept drafts first (a stop among them ends the sequence there), then the sampled token.
    int64_t drafts_appended = 0;
    for (const TokenChoice& t : rc.accepted) {
      if (s->finished) break;
      const size_t before = s->tokens.size();
      AppendToken(r, *s, t);
      drafts_appended += s->tokens.size() > before;
    }
    bool appended = false;
    if (!s->finished) {
      const size_t before = s->tokens.size();
      AppendToken(r, *s, rc.choice);
      appended = s->tokens.size() > before;
    }
    seq_out.push_back({s->id, appended, drafts_appended});
    if (rc.drafted > 0) {
      const auto kept = static_cast<int64_t>(rc.accepted.size());
      engine::RecordVerify(s->draft, rc.drafted, kept);
      r.metrics.spec_draft_tokens += rc.drafted;
      r.metrics.spec_accepted_tokens += kept;
      r.metrics.spec_verify_steps++;
      spec_num_drafts_++;
      spec_draft_tokens_ += rc.drafted;
      spec_accepted_tokens_ += kept;
      // Position i of a draft was kept when more than i drafts were (vLLM's per_pos counter).
      if (spec_accepted_per_pos_.size() < static_cast<size_t>(kept))
        spec_accepted_per_pos_.resize(static_cast<size_t>(kept), 0);
      for (int64_t i = 0; i < kept; ++i) ++spec_accepted_per_pos_[static_cast<size_t>(i)];
    }
    if (s->finished) drops.push_back(s->id);
  }
  for (BeamChoice& bc : c.beams) {
    touch(bc.request);
    KVF_RETURN_IF_ERROR(CommitBeams(*requests_.at(bc.request), bc, &seq_out));
  }
  std::vector<sched::RequestOutcome> req_out;
  for (int64_t rid : touched) {
    Request& r = *requests_.at(rid);
    bool all = true;
    for (auto& s : r.seqs) all = all && s->finished;
    if (r.beam) all = r.seqs.empty();
    req_out.push_back({rid, all});
  }
  KVF_RETURN_IF_ERROR(sched_->OnStepDone(plan, seq_out, req_out));
  // The draft model keeps only what the target kept (its next call would cut the rest anyway).
  if (spec_ && spec_->draft_model())
    for (const RowChoice& rc : c.rows)
      if (rc.drafted > 0)
        if (const int64_t n = sched_->NumComputed(rc.choice.seq); n >= 0)
          spec_->draft_model()->Keep(rc.choice.seq, n);
  FinishRequests(req_out, drops);
  return Status::Ok();
}

Status EngineCore::CutRejectedDrafts(const StepBatch& b,
                                     const std::unordered_map<int64_t, int64_t>& kept_drafts) {
  for (const SampledRow& row : b.sampled) {
    auto kept = kept_drafts.find(row.seq);
    if (row.drafts.empty() || kept == kept_drafts.end()) continue;
    const int64_t keep = row.first_slot + 1 + kept->second;
    if (cache_->Contains(row.seq) && cache_->NumTokens(row.seq) > keep)
      KVF_RETURN_IF_ERROR(cache_->Truncate(row.seq, keep));
  }
  return Status::Ok();
}

void EngineCore::ForgetDraft(int64_t seq) {
  if (spec_ && spec_->draft_model()) spec_->draft_model()->Free(seq);
}

void EngineCore::FinishRequests(const std::vector<sched::RequestOutcome>& outcomes,
                                const std::vector<int64_t>& drops) {
  for (const auto& ro : outcomes) {
    Request& r = *requests_.at(ro.request);
    if (!ro.finished) {
      for (int64_t sid : drops)
        if (seq_owner_.count(sid) && seq_owner_.at(sid) == r.id && r.seqs.size() > 1) {
          (void)sched_->DropSequence(r.id, sid);
          ForgetDraft(sid);
        }
      Emit(r, false);
      continue;
    }
    r.metrics.e2e_ms = Ms(Clock::now() - r.arrival);
    Emit(r, true);
    for (auto& s : r.seqs) ForgetDraft(s->id);
    for (auto& s : r.seqs) seq_owner_.erase(s->id);
    for (auto& s : r.done_beams) seq_owner_.erase(s->id);
    requests_.erase(ro.request);
  }
}

void EngineCore::CountEviction(KvPolicyKind kind, int64_t evicted_tokens) {
  const std::string_view name = KvPolicyName(kind);
  auto it = std::find_if(kv_policy_counts_.begin(), kv_policy_counts_.end(),
                         [&](const EngineStats::KvPolicyCounts& c) { return c.policy == name; });
  if (it == kv_policy_counts_.end())
    it = kv_policy_counts_.insert(kv_policy_counts_.end(), {std::string(name), 0, 0});
  it->evicted_tokens += evicted_tokens;
  ++it->compactions;
}

Status EngineCore::ApplyKvPolicies(const sched::StepPlan& plan,
                                   const std::unordered_map<int64_t, int64_t>& kept_drafts) {
  for (const auto& ch : plan.chunks) {
    auto ow = seq_owner_.find(ch.seq);
    Request& r = *requests_.at(ow->second);
    Seq* s = FindSeq(r, ch.seq);
    if (s == nullptr || !s->evict) continue;
    int64_t end = ch.pos0 + ch.num_tokens - ch.draft_tokens;  // computed after the step
    if (auto k = kept_drafts.find(ch.seq); k != kept_drafts.end()) end += k->second;
    const int64_t evicted_before = s->evict->evicted_tokens();
    KVF_ASSIGN_OR_RETURN(bool compacted, s->evict->AfterStep(*cache_, ch.seq, end));
    if (compacted) {
      ++kv_compactions_;
      CountEviction(s->evict->policy().kind, s->evict->evicted_tokens() - evicted_before);
    }
    if (s->index == 0) {
      r.metrics.kv_evicted_tokens = s->evict->evicted_tokens();
      r.metrics.kv_peak_tokens = s->evict->peak_slots();
      r.metrics.kv_final_tokens = cache_->NumTokens(ch.seq);
    }
  }
  return Status::Ok();
}

Status EngineCore::CommitBeams(Request& r, BeamChoice& c,
                               std::vector<sched::SeqOutcome>* outcomes) {
  if (!c.decided) {  // a beam's distribution is still to come: keep this step's rows
    for (auto& [seq, row] : c.pending)
      if (Seq* s = FindSeq(r, seq)) s->pending_logprobs = std::move(row);
    return Status::Ok();
  }
  r.forked = true;
  for (const BeamCandidate& d : c.done) {
    auto done = CloneSeq(r, *r.seqs[d.parent], static_cast<int32_t>(r.done_beams.size()));
    seq_owner_.erase(done->id);
    done->cum_logprob = d.score;
    done->finished = true;
    done->finish_reason = FinishReasonName(FinishReason::kStop);
    r.done_beams.push_back(std::move(done));
  }
  bool stop = c.stop;
  if (!stop) {
    // The first use of a parent keeps its sequence (and blocks), later uses fork it; parents not
    // chosen are dropped and their blocks freed. Forks first: they copy the parent's state
    // before it changes.
    std::vector<std::unique_ptr<Seq>> new_seqs, forks;
    std::vector<std::pair<Seq*, int32_t>> appends;
    std::vector<bool> claimed(r.seqs.size(), false), parent_used(r.seqs.size(), false);
    for (const BeamCandidate& n : c.next) {
      if (!claimed[n.parent]) {
        claimed[n.parent] = true;
        continue;
      }
      auto child = CloneSeq(r, *r.seqs[n.parent], 0);
      KVF_RETURN_IF_ERROR(sched_->ForkSequence(r.id, r.seqs[n.parent]->id, child->id));
      child->cum_logprob = n.score;
      appends.emplace_back(child.get(), n.token);
      forks.push_back(std::move(child));
    }
    std::fill(claimed.begin(), claimed.end(), false);
    for (const BeamCandidate& n : c.next) {
      if (claimed[n.parent]) continue;
      claimed[n.parent] = true;
      parent_used[n.parent] = true;
      r.seqs[n.parent]->cum_logprob = n.score;
      appends.emplace_back(r.seqs[n.parent].get(), n.token);
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
      generation_tokens_total_++;
      r.metrics.generated_tokens++;
      outcomes->push_back({s->id, true});
    }
    // Length limit: every beam grows by one per step, so all hit max_tokens together.
    if (!r.seqs.empty() && r.seqs.front()->n_generated >= r.params.max_tokens) stop = true;
  }
  for (auto& s : r.seqs) s->pending_logprobs.clear();
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

// --- metrics ----------------------------------------------------------------------------------

void EngineCore::RecordStepMetrics(const sched::StepPlan& plan, Clock::time_point step_start) {
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
}

}  // namespace kvforge
