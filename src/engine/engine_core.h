// engine/engine_core.h — the continuous-batching engine loop, single-threaded and step-driven.
//
// Owns the model, tokenizer, paged KV cache, scheduler and thread pool. Step() (engine_step.cc)
// runs one iteration as named stages, each value in / value out:
//   OfferDrafts()                        speculative decoding: what each sequence may draft
//   plan    = scheduler's Schedule()     (its plan/commit protocol: an uncommitted plan is redone)
//   drafts  = DraftTokens(plan)          fills the draft slots the plan granted (n-gram / model)
//   batch   = BuildBatch(plan, drafts)   reads the requests, changes nothing
//   logits  = RunForward(batch)          writes KV only into the plan's uncommitted slots
//   choices = ChooseTokens(batch)        sampling, drafts verified, n > 1 forks and beam search
//                                        decided, not applied
//   CommitStep(plan, batch, choices)     rejected drafts' KV cut, KV policies, forks, tokens,
//                                        OnStepDone, outputs
//   RecordStepMetrics(plan)
// so an error before the commit leaves every request as it was, and the next Step() redoes the
// same plan. Parallel sampling (n > 1) prefills once and forks the prompt's blocks; beam search
// forks/drops beams on shared blocks.
// Thread-safety: engine thread only (AsyncEngine wraps it with a thread and a queue).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_resources.h"
#include "engine/kv_eviction.h"
#include "engine/kv_offload.h"
#include "engine/kv_space_adapter.h"
#include "engine/speculation.h"
#include "engine/stop_checker.h"
#include "engine/structured_output.h"
#include "kernels/thread_pool.h"
#include "kvforge/llm.h"
#include "kvstore/paged_kv_cache.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace kvforge {

class EngineCore {
 public:
  // `concurrent_sequences`: how many sequences the default KV pool holds full contexts for
  // (engine_resources.h); 0: max_num_seqs. The synchronous Engine passes 1.
  static Result<std::unique_ptr<EngineCore>> Create(const EngineConfig& config,
                                                    int64_t concurrent_sequences = 0);
  ~EngineCore();

  // `id` 0 picks the next free id; a caller-chosen id must be unique.
  Result<int64_t> AddRequest(std::vector<int32_t> prompt, const SamplingParams& params,
                             OutputCallback cb, int32_t priority, int64_t id = 0);
  // The checks AddRequest makes before scheduling, usable from any thread (immutable state only).
  Status ValidateRequest(const std::vector<int32_t>& prompt, const SamplingParams& params) const;
  // Aborts a request in any state; its callback receives a final output with reason "abort".
  void Abort(int64_t request_id);
  bool HasWork() const;
  Status Step();
  EngineStats Stats() const;
  // Every block's use, the prefix cache's entries (at most max_prefix_entries) and the requests
  // holding KV (kv_snapshot.cc).
  KvSnapshot Snapshot(size_t max_prefix_entries) const;
  // Tests: the next Step() fails with kInternal right after this stage, as a real error there
  // would (the stage-failure test checks that the engine is left as it was).
  enum class StepStage { kBuildBatch, kForward, kChooseTokens };
  void InjectStepFaultForTesting(StepStage stage) { injected_fault_ = stage; }
  // Average, over steps so far, of live tokens / reserved KV slots (memory utilization).
  double MeanKvUtilization() const {
    return util_steps_ ? util_sum_ / static_cast<double>(util_steps_) : 0;
  }
  int64_t PeakUsedBlocks() const { return peak_used_blocks_; }
  // Average over steps of 1 - (blocks used) / (blocks the live sequences would use with private
  // copies): the memory block sharing saves for parallel sampling and beam search.
  double MeanSharingSaving() const {
    return share_steps_ ? share_sum_ / static_cast<double>(share_steps_) : 0;
  }
  int64_t PeakUnsharedBlocks() const { return peak_unshared_blocks_; }

  // --- scoring (engine_scoring.cc): teacher-forced forward passes over one sequence outside
  // the scheduler, for perplexity and KV evaluation; the engine must be idle (kFailedPrecondition
  // otherwise). The contracts are kvforge::Engine's (kvforge/engine.h).
  Result<std::vector<float>> LogitsFor(const std::vector<int32_t>& tokens);
  Result<std::vector<float>> LogitsAll(const std::vector<int32_t>& tokens,
                                       const std::vector<int64_t>& steps);
  Status ScoreStream(const std::vector<int32_t>& tokens, const Engine::StreamScoreCallback& cb);
  Result<PerplexityResult> Perplexity(const std::string& text, const PerplexityOptions& options);
  const Engine::EvictionSummary& last_eviction() const { return last_eviction_; }
  Status SaveKvScales(const std::string& path) const;

  const ModelInfo& info() const { return info_; }
  int num_threads() const { return pool_->num_threads(); }
  const tokenizer::Tokenizer& tokenizer() const { return *tok_; }
  const model::ModelConfig& model_config() const { return model_->config(); }
  int64_t max_model_len() const { return max_len_; }
  const kvstore::PagedKvCache& cache() const { return *cache_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Seq {
    int64_t id = 0;
    int32_t index = 0;
    std::vector<int32_t> tokens;  // prompt + generated
    int64_t n_generated = 0;
    std::unique_ptr<sampling::Sampler> sampler;
    std::unique_ptr<engine::StopChecker> stop;
    bool finished = false;
    std::string finish_reason;
    double cum_logprob = 0;
    std::vector<float> token_logprobs;
    std::vector<std::vector<std::pair<int32_t, float>>> top_logprobs;
    std::string delta_text;
    std::vector<int32_t> delta_ids;
    std::vector<float> pending_logprobs;  // beam search: log-softmax waiting for the other beams
    std::unique_ptr<engine::SeqEviction> evict;      // the request's KV policy (null: keeps all)
    std::optional<engine::SequenceGrammar> grammar;  // structured outputs (unset: free text)
    engine::DraftStats draft;                        // speculative decoding's running rate
    std::vector<int32_t> ngram_draft;                // n-gram: this step's proposal
  };
  struct Request {
    int64_t id = 0;
    std::vector<int32_t> prompt;
    SamplingParams params;
    OutputCallback cb;
    std::vector<std::unique_ptr<Seq>> seqs;  // live and finished (n > 1); live beams (beam search)
    std::vector<std::unique_ptr<Seq>> done_beams;  // finished beam hypotheses
    bool forked = false;
    bool beam = false;
    Clock::time_point arrival, first_scheduled, first_token, last_token;
    bool scheduled_once = false, got_token = false;
    RequestMetrics metrics;
    std::shared_ptr<grammar::GrammarMasker> grammar;  // null: no structured output
    std::vector<int32_t> end_tokens;                  // for the sequences' grammars
  };

  // A sampled chunk's logits rows: 1, or with drafts 1 + drafts.size() (the last known token's
  // and each draft's), from row `first_row` of the forward's output.
  struct SampledRow {
    int64_t request = 0;
    int64_t seq = 0;
    int64_t first_row = 0;
    int64_t first_slot = 0;                      // KV slot of the chunk's first token
    std::vector<int32_t> drafts;                 // speculative decoding: the tokens verified
    std::vector<sampling::TokenDistribution> q;  // their draft distributions (empty: points)
  };
  // The drafts for a plan's draft slots, per sequence.
  struct StepDrafts {
    std::unordered_map<int64_t, spec::Draft> by_seq;
  };
  struct StepBatch {
    model::Batch batch;
    std::vector<SampledRow> sampled;  // in logits-row order
    int64_t prefill_tokens = 0;
    Clock::time_point planned_at;
  };
  // A token chosen for a sequence (-1: nothing may be sampled, the sequence ends), with its
  // log-probability and alternatives when the request asked for logprobs.
  struct TokenChoice {
    int64_t seq = 0;
    int32_t token = -1;
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;
  };
  // n > 1 at the end of the prompt: completion `index` forks the parent, with its own sampler
  // (already drawn from) and first token.
  struct ForkChoice {
    int32_t index = 0;
    std::unique_ptr<sampling::Sampler> sampler;
    TokenChoice choice;
  };
  struct BeamCandidate {
    size_t parent = 0;  // index into the request's live beams
    int32_t token = 0;
    double score = 0;
  };
  // One beam request's step: the next beams and the hypotheses that ended, or (waiting for a
  // beam's distribution) only this step's log-softmax rows to keep.
  struct BeamChoice {
    int64_t request = 0;
    bool decided = false;
    std::vector<std::pair<int64_t, std::vector<float>>> pending;  // seq -> log-softmax [n_vocab]
    std::vector<BeamCandidate> next, done;
    bool stop = false;
  };
  struct RowChoice {
    int64_t request = 0;
    std::vector<ForkChoice> forks;      // applied before the parent's own token
    std::vector<TokenChoice> accepted;  // drafts kept, appended before `choice`
    int64_t drafted = 0;                // drafts verified
    TokenChoice choice;
  };
  struct StepChoices {
    std::vector<RowChoice> rows;  // non-beam sampled rows, in order
    std::vector<BeamChoice> beams;
  };

  EngineCore() = default;
  Seq* FindSeq(Request& r, int64_t seq);
  const Seq* FindSeq(const Request& r, int64_t seq) const;
  // A sequence of `r`; `sampler` (one already drawn from) or a fresh one seeded for `index`.
  std::unique_ptr<Seq> NewSeq(const Request& r, int32_t index,
                              std::unique_ptr<sampling::Sampler> sampler = nullptr);
  // Completion `index`'s sampler (seed + index: distinct streams for n > 1), and the request's
  // grammar state at the start of its output (unset: free text).
  static std::unique_ptr<sampling::Sampler> SamplerFor(const Request& r, int32_t index);
  static std::optional<engine::SequenceGrammar> GrammarFor(const Request& r);
  std::unique_ptr<Seq> CloneSeq(const Request& r, const Seq& from, int32_t index);
  // --- the step's stages (engine_step.cc) ---
  void OfferDrafts();
  Result<StepDrafts> DraftTokens(const sched::StepPlan& plan);
  Result<StepBatch> BuildBatch(const sched::StepPlan& plan, StepDrafts drafts) const;
  Status RunForward(StepBatch& batch);
  Result<StepChoices> ChooseTokens(const StepBatch& batch);
  Status CommitStep(const sched::StepPlan& plan, const StepBatch& batch, StepChoices choices);
  void RecordStepMetrics(const sched::StepPlan& plan, Clock::time_point step_start);
  Status InjectedFault(StepStage after);
  // Copies of the KV policy state of the plan's sequences (Step restores them on a failure).
  std::vector<std::pair<Seq*, std::unique_ptr<engine::SeqEviction>>> SavePolicies(
      const sched::StepPlan& plan);
  // ChooseTokens' parts: one row's token (masked by the grammar, then sampled), and a beam
  // request's candidates from every live beam's log-softmax row.
  TokenChoice ChooseToken(const Request& r, int64_t seq, sampling::Sampler& sampler,
                          std::optional<engine::SequenceGrammar>& grammar,
                          const std::vector<int32_t>& history, float* logits) const;
  BeamChoice DecideBeams(const Request& r, const std::vector<const std::vector<float>*>& lp) const;
  // The chosen token's log-probability and the request's top alternatives, from the row's logits
  // before masking (`raw`, empty unless the request asked for logprobs).
  void AddLogprobs(const Request& r, const std::vector<float>& raw, TokenChoice* c) const;
  // A row with drafts: each draft checked against the target's distribution at its position
  // (sampling/speculative.h) until one is refused (its replacement ends the row) or all are kept
  // (then the last row's token). `rows` [1 + drafts][n_vocab].
  RowChoice VerifyDrafts(const Request& r, Seq& s, const SampledRow& row, float* rows) const;
  // Whether sequence `s` of `r` may draft: not beams, not a KV policy whose decode steps observe
  // attention or read sparsely (their statistics would see the drafts).
  bool MaySpeculate(const Request& r, const Seq& s) const;
  // Cuts rejected drafts' KV before the KV policies and the scheduler see the sequence.
  // `kept_drafts`: seq -> drafts its verification kept.
  Status CutRejectedDrafts(const StepBatch& b,
                           const std::unordered_map<int64_t, int64_t>& kept_drafts);
  void ForgetDraft(int64_t seq);
  // CommitStep's parts.
  void NoteFirstSchedule(const sched::StepPlan& plan, Clock::time_point at);
  void NoteTokenTimes(const StepBatch& batch);
  // Appends a chosen token to a (non-beam) sequence: stop strings, EOS, max_tokens, the end of
  // its grammar; token -1 ends the sequence with "stop".
  void AppendToken(Request& r, Seq& s, const TokenChoice& choice);
  void FinishSeq(Seq& s, FinishReason reason);
  Status CommitBeams(Request& r, BeamChoice& choice, std::vector<sched::SeqOutcome>* outcomes);
  // After the forward: each scheduled sequence with a KV policy compacts if its policy says so.
  // Adds one compaction of a `kind` policy that dropped `evicted_tokens` to kv_policy_counts_.
  void CountEviction(KvPolicyKind kind, int64_t evicted_tokens);
  Status ApplyKvPolicies(const sched::StepPlan& plan,
                         const std::unordered_map<int64_t, int64_t>& kept_drafts);
  void FinishRequests(const std::vector<sched::RequestOutcome>& done,
                      const std::vector<int64_t>& drops);
  void Emit(Request& r, bool final);
  RequestOutput BuildOutput(Request& r, bool final);
  void FinishBeamRequest(Request& r);
  // Scoring: one forward of `batch` (one chunk of the scoring sequence at token index
  // `token_pos`), compacting it afterwards under `evict` when set.
  Status ScoringForward(model::Batch& batch, int64_t token_pos, engine::SeqEviction* evict,
                        std::vector<float>* logits);
  // Scoring: `tokens` into the emptied scoring sequence from position 0, in forward steps of
  // max_num_batched_tokens; `out` gets every position's logits [n][n_vocab] (all_logits) or the
  // last token's [n_vocab]. The sequence is freed afterwards.
  Status ScoringPrefill(const std::vector<int32_t>& tokens, bool all_logits,
                        std::vector<float>* out);
  Status RequireIdle() const;

  EngineConfig cfg_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  std::unique_ptr<kvstore::PagedKvCache> cache_;
  std::unique_ptr<engine::KvOffload> offload_;  // null: no tiers; outlives space_, which uses it
  std::unique_ptr<engine::EngineKvSpace> space_;
  std::unique_ptr<sched::Scheduler> sched_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<engine::GrammarCache> grammars_;
  model::Workspace ws_;
  int64_t max_len_ = 0;
  int64_t next_request_id_ = 1;
  int64_t next_seq_id_ = 1;
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests_;
  std::unordered_map<int64_t, int64_t> seq_owner_;  // seq id -> request id
  int64_t prompt_tokens_total_ = 0, generation_tokens_total_ = 0, steps_ = 0;
  double util_sum_ = 0;
  int64_t util_steps_ = 0;
  int64_t peak_used_blocks_ = 0;
  double share_sum_ = 0;
  int64_t share_steps_ = 0;
  int64_t peak_unshared_blocks_ = 0;
  std::vector<float> logits_;
  int64_t kv_compactions_ = 0;
  std::vector<EngineStats::KvPolicyCounts> kv_policy_counts_;  // per policy, first use first
  ModelInfo info_;
  Engine::EvictionSummary last_eviction_;
  std::optional<StepStage> injected_fault_;
  std::unique_ptr<engine::Speculator> spec_;  // null: speculative decoding off
  int64_t spec_num_drafts_ = 0, spec_draft_tokens_ = 0, spec_accepted_tokens_ = 0;
  std::vector<int64_t> spec_accepted_per_pos_;  // [draft position] drafts kept there
  double draft_round_ms_ = 0;  // a draft-model forward over the sequences drafting, ms (EMA)
};

}  // namespace kvforge
