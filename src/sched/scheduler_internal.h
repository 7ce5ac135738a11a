// sched/scheduler_internal.h — the Scheduler's state, shared by scheduler.cc (requests, commit,
// forks, queries, invariants) and schedule_step.cc (Schedule(): batch forming, admission,
// preemption). Not part of the module's interface.
//
// Every request lives in `requests` and in exactly one queue: `waiting` and `swapped` are ordered
// maps keyed by rank, `running` is a vector kept sorted by rank (best first, so the preemption
// victim is running.back()). `aging` indexes the non-promoted waiting requests by arrival so the
// oldest can be promoted in O(log n). seq_owner maps every live sequence id to its request.
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sched/scheduler.h"

namespace kvforge::sched {

struct SeqState {
  int64_t id = 0;
  int64_t num_tokens = 0;       // prompt + generated
  int64_t num_computed = 0;     // committed: K/V written for [0, num_computed)
  int64_t prefill_end = 0;      // chunks starting before this are prefill (prompt or recompute)
  int64_t kv_slots = 0;         // slots asked of KvSpace (0: holds nothing); kept while swapped
  int64_t inflight_end = -1;    // end of this sequence's chunk in the pending plan, -1: none
  int64_t inflight_drafts = 0;  // of which draft slots (speculative decoding)
};

enum class Queue { kWaiting, kRunning, kSwapped };

// Rank: smaller is better. Total order because arrival serials are unique.
struct Rank {
  int32_t promoted_class = 1;  // 0: promoted by aging
  int64_t priority = 0;        // 0 under kFcfs
  int64_t arrival = 0;
  auto operator<=>(const Rank&) const = default;
};

struct Req {
  RequestId id = 0;
  int64_t arrival = 0;       // serial of AddRequest calls
  int64_t arrival_step = 0;  // Schedule() count at AddRequest
  double arrival_ms = 0;     // busy_ms at AddRequest
  int32_t priority = 0;
  int32_t num_seqs = 1;
  int64_t prompt_tokens = 0;
  int64_t max_new_tokens = 0;
  bool promoted = false;
  bool admitted_once = false;
  int64_t cached_tokens = 0;  // prefix-cache hit at first admission
  Queue queue = Queue::kWaiting;
  std::vector<SeqState> seqs;  // creation order
};

// Speculative decoding: what a sequence offered for the next Schedule() (Scheduler::OfferDrafts).
struct DraftOffer {
  int64_t max_drafts = 0;
  double acceptance = 0;
  double draft_ms = 0;
};

// The plan being formed by one Schedule() call.
struct PlanBuilder {
  int64_t budget = 0;
  // Decode-priority chunking: when itl_limited, prefill chunks share prefill_ms_left (the ITL
  // target minus the decodes' predicted cost); itl_cut records that a chunk was cut.
  bool itl_limited = false;
  double prefill_ms_left = 0;
  bool itl_cut = false;
  bool ttft_lifted = false;  // the limit was lifted for a prompt at risk (max_ttft_ms)
  std::vector<ScheduledChunk> decode;
  std::vector<ScheduledChunk> prefill;
  std::vector<RequestId> preempted;
  std::vector<RequestId> swapped_in;
  int64_t num_seqs() const { return static_cast<int64_t>(decode.size() + prefill.size()); }
};

struct Scheduler::Impl {
  Impl(const SchedulerConfig& config, KvSpace* kv);

  // --- Requests and queues (scheduler.cc) ---
  Rank RankOf(const Req& r) const;
  Req* Find(RequestId id) const;
  SeqState* FindSeq(int64_t seq) const;  // nullptr if unknown
  Req* Owner(int64_t seq) const;         // nullptr if unknown
  void PushWaiting(Req* r);
  void PushRunning(Req* r);
  void PushSwapped(Req* r);
  void RemoveFromQueue(Req* r);
  // Frees the KV of every sequence and forgets the request.
  void Retire(Req* r);
  // Sequences a running request counts against max_num_seqs.
  static int64_t SeqReservation(const Req& r);
  int64_t RunningReservation() const;
  static bool Complete(const Req& r, const SeqState& s);  // generated max_new_tokens
  static int64_t PostStepComputed(const SeqState& s);
  Status ValidateOutcomes(const StepPlan& plan, const std::vector<SeqOutcome>& seqs,
                          const std::vector<RequestOutcome>& requests) const;

  // --- One step (schedule_step.cc) ---
  StepPlan Schedule();
  void PromoteStarved();
  // Schedules the decode (prefill == false) or prefill chunks of `r`. With may_preempt, a
  // failed Grow preempts running_.back() until it succeeds; returns false if `r` itself was
  // preempted. Without, a failed Grow just leaves the sequence out of this step.
  bool ScheduleSeqs(Req* r, bool prefill, bool may_preempt, PlanBuilder* b);
  // Tokens of `s`'s next prefill chunk under the token budget alone (0: none fit).
  int64_t UntimedPrefillChunk(const SeqState& s, int64_t budget) const;
  // ... and under decode-priority chunking's time budget too, in the plan `b` is forming.
  int64_t PrefillChunk(const SeqState& s, const PlanBuilder& b) const;
  // Speculative decoding: lengthens the decode chunks of sequences with an offer by the draft
  // slots the budget, the blocks and the cost model allow.
  void GrantDrafts(PlanBuilder* b);
  int64_t DraftSlotsFor(const Req& r, const SeqState& s, const DraftOffer& offer,
                        const PlanBuilder& b) const;
  // Starts decode-priority chunking for `b` once its decodes are scheduled.
  void LimitPrefillForItl(PlanBuilder* b) const;
  // Whether a prompt waiting for its first token (running or waiting) would get it after
  // cfg.max_ttft_ms unless this step's prefill runs uncut.
  bool FirstTokenAtRisk() const;
  bool FirstTokenAtRisk(const Req& r) const;
  // Moves running `victim` out (swap when configured and possible, else recompute), removing
  // its chunks from `b`.
  void Preempt(Req* victim, PlanBuilder* b);
  bool TrySwapOut(Req* r);
  void ResetForRecompute(Req* r);
  // Blocks still owed to running requests' unfinished prefills and pending forks.
  int64_t OutstandingBlocks() const;
  int64_t AdmissionNeed(const Req& r) const;
  int64_t SwapInNeed(const Req& r) const;
  void SwapInRequests(PlanBuilder* b, int64_t* avail, bool* exempt);
  void AdmitWaiting(PlanBuilder* b, int64_t* avail, bool* exempt);
  // Offers the first cfg.prefix_prefetch_requests of `order` still waiting to
  // KvSpace::PrefetchPrefix.
  void PrefetchWaiting(const std::vector<Req*>& order, const std::vector<bool>& admitted);
  // Waiting requests in the order admission visits them (rank, or longest cached prefix).
  std::vector<Req*> AdmissionOrder() const;
  // True when `r` should wait for a prefix another running request is computing.
  bool DeferForInflightPrefix(const Req& r) const;
  // Whether the KV space is still bringing r's prefix from elsewhere (KvSpace::PrefixLoading).
  bool WaitsForPrefixLoad(const Req& r) const;
  // Gives the fresh sequences of `r` their cached prefixes (num_computed = hit).
  void AttachPrefixes(Req* r);

  SchedulerConfig cfg;
  KvSpace* kv;
  int64_t watermark_blocks = 0;
  int64_t step = 0;          // Schedule() calls so far
  int64_t pending_step = 0;  // step of the uncommitted plan, 0: none
  int64_t next_arrival = 1;
  // Sum of the measured step times (ObserveStepCost): the clock max_ttft_ms is measured on. It
  // leaves out idle time, when nobody waits.
  double busy_ms = 0;
  SchedulerStats stats;
  StepCostModel cost;

  std::unordered_map<RequestId, std::unique_ptr<Req>> requests;
  std::unordered_map<int64_t, Req*> seq_owner;  // sequence id -> its request (owned above)
  std::map<Rank, Req*> waiting;
  std::map<Rank, Req*> swapped;
  std::vector<Req*> running;           // sorted by rank, best first
  std::map<int64_t, Req*> aging;       // arrival -> non-promoted waiting request
  std::vector<int64_t> inflight_seqs;  // sequences with inflight_end set (plan + forks)
  std::unordered_map<int64_t, DraftOffer> draft_offers;  // for the next Schedule() only
};

}  // namespace kvforge::sched
