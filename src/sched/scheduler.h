// sched/scheduler.h — iteration-level scheduling (Orca / vLLM): which sequences run in the next
// forward step and which token spans, under a token budget and a sequence cap, with chunked
// prefill, admission only when KV blocks fit, FCFS or priority order, and preemption (recompute
// or swap) when blocks run out. Plain data in, plain data out: no model, no kernels, no bytes.
//
// Token accounting per sequence (as vLLM): `num_tokens` (prompt + generated so far) and
// `num_computed` (tokens whose K/V are in the cache). A step schedules up to
// num_tokens - num_computed tokens of a sequence: a prefill chunk, or 1 decode token. Preemption
// by recompute frees the blocks and sets num_computed = 0 (the whole prefix, generated tokens
// included, is prefilled again later, so greedy output is unchanged); by swap, the blocks move to
// host memory and come back.
//
// Protocol per step (engine thread):
//   StepPlan plan = scheduler.Schedule();            // allocates the plan's KV slots in KvSpace
//   ... model forward over plan.chunks, sample where chunk.sample is true ...
//   ... optionally ForkSequence / DropSequence (beams, n > 1), after the forward ...
//   scheduler.OnStepDone(plan, seqs, requests);      // commits the chunks, appends sampled tokens
// A plan that is never committed (failed forward, empty plan) is simply discarded by the next
// Schedule(): its KV slots stay reserved and the same positions are scheduled again. Only the
// latest plan can be committed, once.
//
// Order inside a step: (1) one decode token for every running sequence that has one (best
// request first), (2) the next prefill chunk of running requests that are part-way through a
// prefill or a recompute, (3) swapped requests are swapped back in (only when this Schedule
// preempted nothing), (4) waiting requests are admitted in queue order (only when nothing was
// preempted and nothing is left swapped out), each getting its first chunk. When a running
// sequence cannot grow, the worst running request (see "order" below) is preempted, possibly
// the one asking; a request never preempts a better one. Keep max_num_batched_tokens >=
// max_num_seqs (as vLLM requires): otherwise the decodes of the worst requests wait too.
//
// Order. Requests are ranked by (promoted first, then priority under Policy::kPriority, lower
// value first, then arrival). The waiting and swapped queues and the running set follow this
// rank. Under kFcfs a recompute-preempted request therefore goes back to the front of the
// waiting queue (everything still waiting arrived later); under kPriority it goes to the front
// of its priority class. A request still waiting max_wait_steps steps after it arrived is
// promoted: it then ranks ahead of every non-promoted request (and is preempted last).
// Admission is strict: the first waiting request that does not fit stops admission this step.
//
// Admission (what "fits" means). A waiting request is admitted when, after the blocks still
// owed to running prefills are set aside, the free blocks cover (a) every block its prefill
// needs (whole prompt, or the whole sequence for a recompute) plus (b) one block for each
// sequence it may still fork (num_seqs - live sequences: a fork's first token copies or opens a
// block), leaving floor(kv_watermark * total) blocks free unless nothing is running. Growth while
// running is not reserved: the watermark absorbs it and preemption handles the rest.
// Swap-in uses the same rule with ceil(slots / block_tokens) blocks per swapped sequence plus
// one block of growth per sequence (with nothing running: the swapped blocks alone). A request
// AddRequest accepted therefore always fits once it is the only one left: nothing deadlocks.
//
// Sequences. Requests with num_seqs > 1 prefill their first sequence; the engine forks the
// others (ForkSequence), typically right after the forward that sampled the prompt's last
// position, and may drop beams (DropSequence). The cap max_num_seqs counts
// max(num_seqs, live sequences) per running request, reserved at admission. A sequence whose
// chunk sampled but that got no token (SeqOutcome.appended_token false, or no outcome) simply
// has nothing to run until a later OnStepDone appends one (a beam waiting for its siblings) or
// the engine drops it / finishes the request. A sequence that generated max_new_tokens is never
// scheduled again.
//
// Static batching (baseline): waiting requests are admitted only when nothing is running or
// swapped, as many as fit the sequence cap and the KV blocks, even with no token budget left
// for their first chunk; nothing else is admitted until every one of them has finished.
// Thread-safety: engine thread only. Complexity: Schedule() is O(running sequences + admitted
// requests x log(waiting)); OnStepDone O(plan + outcomes); CheckInvariants O(all sequences).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvforge/status.h"
#include "sched/kv_space.h"
#include "sched/step_cost_model.h"

namespace kvforge::sched {

using RequestId = int64_t;

enum class PreemptionMode { kRecompute, kSwap };
enum class Policy { kFcfs, kPriority };

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 2048;  // tokens per step, all sequences together (>= 1)
  int64_t max_num_seqs = 64;              // running sequences per step (>= 1)
  // Split long prompts across steps. Without it a prefill runs in one chunk (prompts longer than
  // max_num_batched_tokens are rejected; a recompute longer than that is still split).
  bool chunked_prefill = true;
  // A prefill chunk never exceeds this (0: no limit beyond the budget); keeps decode latency of
  // the others bounded while a long prompt is processed. Only with chunked_prefill.
  int64_t long_prefill_token_threshold = 0;
  // Decode-priority chunking (0: off; only with chunked_prefill). While sequences decode, a
  // step's prefill is cut so that the step's predicted time stays within max_itl_ms: the budget
  // left after the decodes' predicted cost goes to prefill chunks, so it shrinks as the decodes
  // grow. The prediction is a StepCostModel fitted from ObserveStepCost; until it has seen
  // enough steps, and in steps without decodes (no inter-token latency to protect), nothing is
  // cut. vLLM's and Sarathi-Serve's stall-free batching, with the budget measured, not set.
  double max_itl_ms = 0;
  // With max_itl_ms: a step with decodes still carries up to this many prefill tokens when a
  // prefill is waiting, so prompts progress even when the decodes alone exceed the target; fewer
  // when that many would add more than a quarter of the target to the step (never below one).
  int64_t min_prefill_chunk = 32;
  // With max_itl_ms: a step's prefill is not cut while a prompt still waiting for its first token
  // is at risk of getting it later than this, i.e. when the time since it arrived plus its
  // remaining prefill at full speed (both measured by the step cost model, times its tail
  // factor) reaches max_ttft_ms. A 1.1B model's prompt tokens cost ~10 ms each, so a fixed ITL
  // target alone starves prompts there (#46). 0: never lifted.
  double max_ttft_ms = 0;
  Policy policy = Policy::kFcfs;
  PreemptionMode preemption_mode = PreemptionMode::kRecompute;
  bool static_batching = false;  // baseline: admit a batch only when nothing is running
  // Steps after its arrival a request may still be waiting before it is promoted ahead of all
  // non-promoted requests (0: never promote).
  int64_t max_wait_steps = 1000;
  // Fraction of all KV blocks kept free when admitting or swapping in (0 <= w < 1), so running
  // sequences can grow for a while without preemption (vLLM v0's watermark).
  double kv_watermark = 0.01;
  // With a prefix-caching KvSpace: admit waiting requests with the longest cached prefix first
  // (SGLang's longest-prefix-match; aging still promotes starved requests ahead of everything),
  // and hold back a request whose prefix another running request is prefilling right now until
  // that prefix is cached. Plain rank order when more than lpm_max_queue requests wait.
  bool cache_aware = true;
  int64_t lpm_max_queue = 128;
  // With a KvSpace that brings prefixes from elsewhere (offload tiers): the first this many
  // requests left waiting after admission may have their prefixes fetched already, while the
  // requests ahead of them compute (KvSpace::PrefetchPrefix), so their loads are done by the time
  // they are admitted. 0: a load starts only when its request could be admitted.
  int64_t prefix_prefetch_requests = 4;

  Status Validate() const;
};

struct NewRequest {
  RequestId id = 0;
  int64_t seq = 0;             // id of the request's first sequence (engine-chosen, unique)
  int64_t prompt_tokens = 0;   // > 0
  int64_t max_new_tokens = 0;  // >= 1: prompt + max_new_tokens is what the request may need
  int32_t priority = 0;        // lower value is served first under Policy::kPriority
  int32_t num_seqs = 1;        // sequences after the prompt (n / beam width), 1..max_num_seqs
  // The most KV slots one of its sequences holds (a KV eviction policy bounds it below prompt +
  // max_new_tokens); 0: prompt_tokens + max_new_tokens. Admission's capacity check uses it.
  int64_t max_kv_tokens = 0;
};

// One scheduled span: tokens [pos0, pos0 + num_tokens) of sequence `seq`.
struct ScheduledChunk {
  RequestId request = 0;
  int64_t seq = 0;
  int64_t pos0 = 0;
  int64_t num_tokens = 0;
  bool is_prefill = false;  // part of the prompt (or of a recompute after preemption)
  bool sample = false;      // the chunk reaches the end of the known tokens: sample a token
  // Speculative decoding: the last draft_tokens of num_tokens are slots for guessed tokens that
  // follow the sequence's last known one (a decode chunk only); the engine verifies them in this
  // step and reports how many it kept (SeqOutcome::accepted_drafts).
  int64_t draft_tokens = 0;
};

struct StepPlan {
  int64_t step = 0;                    // serial of the Schedule() call that made this plan
  std::vector<ScheduledChunk> chunks;  // decode chunks first, then prefill chunks
  std::vector<RequestId> preempted;    // preempted during this Schedule() (recompute or swap)
  std::vector<RequestId> swapped_in;
  int64_t num_batched_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

// What happened to a sequence after its chunk ran.
struct SeqOutcome {
  int64_t seq = 0;
  // A sampled token was appended (num_tokens += 1). Valid for any sequence whose known tokens
  // are all computed once this step is committed (not only those sampled in this plan: a beam
  // may get its token a step later) and that has not generated max_new_tokens yet.
  bool appended_token = false;
  // Speculative decoding: drafted tokens of the chunk kept as tokens (<= its draft_tokens); they
  // count as computed and are appended before the sampled one. The rest of the draft slots are
  // released (KvSpace::Truncate).
  int64_t accepted_drafts = 0;
};
struct RequestOutcome {
  RequestId request = 0;
  bool finished = false;  // retire the request and free its blocks
};

enum class RequestState { kWaiting, kRunning, kSwapped, kFinished };

struct SchedulerStats {
  int64_t num_waiting = 0;
  int64_t num_running = 0;  // requests
  int64_t num_swapped = 0;
  int64_t num_running_seqs = 0;       // live sequences of running requests
  int64_t num_preemptions = 0;        // total so far, recompute and swap
  int64_t num_swap_preemptions = 0;   // of which by swap
  int64_t num_recomputed_tokens = 0;  // computed tokens thrown away by recompute preemption
  int64_t num_swap_ins = 0;
  int64_t num_steps = 0;              // Schedule() calls
  int64_t num_prefix_deferrals = 0;   // admissions held back for an in-flight shared prefix
  int64_t num_prefix_load_waits = 0;  // admissions held back while the KV space loads a prefix
  int64_t num_itl_limited_steps = 0;  // steps whose prefill max_itl_ms cut
  int64_t num_ttft_lifted_steps = 0;  // steps max_itl_ms left uncut for a prompt (max_ttft_ms)
  int64_t num_draft_slots = 0;        // draft slots granted (speculative decoding), all steps
  int64_t num_drafts_refused = 0;     // offers that got no slot (budget, blocks or cost)
};

// The cost-model features of a plan's chunks.
StepShape ShapeOf(const std::vector<ScheduledChunk>& chunks);

class Scheduler {
 public:
  // `config` must be valid (KVF_CHECK); `kv` must outlive the scheduler.
  Scheduler(const SchedulerConfig& config, KvSpace* kv);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. InvalidArgument for bad fields, duplicate ids/seqs, num_seqs above
  // max_num_seqs, or (without chunked prefill) a prompt above max_num_batched_tokens;
  // ResourceExhausted when it could never fit: num_seqs x the blocks of prompt + max_new_tokens
  // (the footprint with no sharing, which a recompute of forked sequences can need) exceed the
  // whole cache.
  Status AddRequest(const NewRequest& r);
  // Removes a request in any state, at any time (also between Schedule and OnStepDone: its
  // chunks are then ignored), and frees its blocks. NotFound if unknown.
  Status Abort(RequestId id);

  StepPlan Schedule();
  // Speculative decoding, asked before a Schedule() and valid for that one only: `seq`, when it
  // gets a decode chunk, may carry up to `max_drafts` slots for drafted tokens, each kept with
  // probability about `acceptance` (0..1, the drafter's running rate), each costing
  // `draft_ms` to make (a draft model's forward; 0 for prompt lookup). Slots are granted only
  // from the token budget left after every decode, without preempting, within max_new_tokens,
  // and (once the step cost model is ready) only while the tokens they are expected to add cost
  // less time per token than the step without them: a compute-bound step drafts nothing.
  void OfferDrafts(int64_t seq, int64_t max_drafts, double acceptance, double draft_ms = 0);
  // Commits `plan` (must be the latest, uncommitted plan): computed counts advance, tokens are
  // appended, finished requests retire. Validates everything before changing anything:
  // InvalidArgument for a stale plan or a bad outcome, NotFound for an unknown sequence or
  // request that was not in the plan (ones aborted or dropped during the step are ignored).
  Status OnStepDone(const StepPlan& plan, const std::vector<SeqOutcome>& seqs,
                    const std::vector<RequestOutcome>& requests);

  // Decode-priority chunking's input: `plan` (any plan this scheduler made) took `ms` of wall
  // time, end to end (forward, sampling, commit). Ignored unless ms is finite and >= 0.
  void ObserveStepCost(const StepPlan& plan, double ms);
  const StepCostModel& step_cost_model() const;

  // Parallel sampling / beams: `child` becomes a sequence of the running `request`, sharing
  // `parent`'s blocks (KvSpace::Fork) and token counts. The parent must be past its prefill and
  // hold no slot that is neither committed nor planned in the step in flight. During a step
  // (after the forward) the child inherits the parent's chunk, so both advance in OnStepDone;
  // between steps the child also shares the parent's sampled, not yet computed, last token.
  // DropSequence frees a sequence (a pruned beam, a finished sample), in any state, at any time;
  // the last sequence of a request cannot be dropped (finish or abort the request instead).
  Status ForkSequence(RequestId request, int64_t parent, int64_t child);
  Status DropSequence(RequestId request, int64_t seq);

  // kFinished for a retired (finished or aborted) or unknown request; see Contains.
  RequestState State(RequestId id) const;
  bool Contains(RequestId id) const;
  // Live sequences of a request, in creation order (empty if unknown).
  std::vector<int64_t> Sequences(RequestId id) const;
  // Prompt tokens found in the prefix cache when the request was first admitted (0: none or
  // not admitted yet; -1: unknown request).
  int64_t NumCachedTokens(RequestId id) const;
  // Committed counts; -1 for an unknown sequence.
  int64_t NumTokens(int64_t seq) const;
  int64_t NumComputed(int64_t seq) const;
  // Token slots the scheduler has asked KvSpace to hold for `seq` (0: none; kept while swapped).
  int64_t NumKvSlots(int64_t seq) const;
  SchedulerStats Stats() const;
  bool HasWork() const;
  const SchedulerConfig& config() const;

  // Every request is in exactly one queue (matching its state and rank); sequence ids are
  // unique; token counts are ordered (0 <= computed <= slots held, prompt <= tokens <= prompt +
  // max_new); waiting requests hold no KV; KvSpace holds every running sequence's slots; with
  // nothing running every block is free; the running requests' reservations fit max_num_seqs.
  Status CheckInvariants() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvforge::sched
