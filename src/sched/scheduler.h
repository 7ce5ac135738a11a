// sched/scheduler.h — iteration-level scheduling (Orca / vLLM): which sequences run in the next
// forward step and which token spans, under a token budget and a sequence cap, with chunked
// prefill, admission only when KV blocks fit, FCFS or priority order, and preemption (recompute
// or swap) when blocks run out. Plain data in, plain data out: no model, no kernels, no bytes.
//
// Token accounting per sequence (as vLLM): `num_tokens` (prompt + generated so far) and
// `num_computed` (tokens whose K/V are in the cache). A step schedules up to
// num_tokens - num_computed tokens of a sequence: a prefill chunk, or 1 decode token. Preemption
// by recompute frees the blocks and sets num_computed = 0 (the whole prefix is prefilled again
// later, so greedy output is unchanged); by swap, the blocks move to host memory and come back.
//
// Protocol per step (engine thread):
//   StepPlan plan = scheduler.Schedule();            // allocates the plan's KV slots in KvSpace
//   ... model forward over plan.chunks, sample where chunk.sample is true ...
//   scheduler.OnStepDone(plan, outcomes);            // appends sampled tokens, retires finished
// Requests with n > 1 sequences (parallel sampling, beams) prefill once on their first sequence;
// the engine forks the others after the prompt (ForkSequence) and may drop beams (DropSequence).
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvforge/status.h"
#include "sched/kv_space.h"

namespace kvforge::sched {

using RequestId = int64_t;

enum class PreemptionMode { kRecompute, kSwap };
enum class Policy { kFcfs, kPriority };

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 2048;  // tokens per step, all sequences together
  int64_t max_num_seqs = 64;              // running sequences per step
  bool chunked_prefill = true;            // split long prompts across steps
  // A prefill chunk never exceeds this (0: no limit beyond the budget); keeps decode latency of
  // the others bounded while a long prompt is processed.
  int64_t long_prefill_token_threshold = 0;
  Policy policy = Policy::kFcfs;
  PreemptionMode preemption_mode = PreemptionMode::kRecompute;
  bool static_batching = false;  // baseline: admit a batch only when nothing is running
  // Steps a waiting request may be passed over (e.g. by priority) before it is served first.
  int64_t max_wait_steps = 1000;

  Status Validate() const;
};

struct NewRequest {
  RequestId id = 0;
  int64_t seq = 0;                // id of the request's first sequence (engine-chosen, unique)
  int64_t prompt_tokens = 0;      // > 0
  int64_t max_new_tokens = 0;     // >= 1: prompt + max_new_tokens is what the request may need
  int32_t priority = 0;           // lower value is served first under Policy::kPriority
  int32_t num_seqs = 1;           // sequences after the prompt (n / beam width)
};

// One scheduled span: tokens [pos0, pos0 + num_tokens) of sequence `seq`.
struct ScheduledChunk {
  RequestId request = 0;
  int64_t seq = 0;
  int64_t pos0 = 0;
  int64_t num_tokens = 0;
  bool is_prefill = false;  // part of the prompt (or of a recompute after preemption)
  bool sample = false;      // the chunk reaches the end of the known tokens: sample a token
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // decode chunks first, then prefill chunks
  std::vector<RequestId> preempted;    // preempted during this Schedule() (recompute or swap)
  std::vector<RequestId> swapped_in;
  int64_t num_batched_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

// What happened to a sequence after its chunk ran.
struct SeqOutcome {
  int64_t seq = 0;
  bool appended_token = false;  // a sampled token was appended (num_tokens += 1)
};
struct RequestOutcome {
  RequestId request = 0;
  bool finished = false;        // retire the request and free its blocks
};

enum class RequestState { kWaiting, kRunning, kSwapped, kFinished };

struct SchedulerStats {
  int64_t num_waiting = 0;
  int64_t num_running = 0;   // requests
  int64_t num_swapped = 0;
  int64_t num_preemptions = 0;  // total so far
  int64_t num_steps = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvSpace* kv);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. InvalidArgument for bad fields or duplicate ids/seqs; ResourceExhausted
  // when it could never fit (prompt + max_new_tokens needs more blocks than the whole cache).
  Status AddRequest(const NewRequest& r);
  // Removes a request in any state and frees its blocks. NotFound if unknown.
  Status Abort(RequestId id);

  StepPlan Schedule();
  Status OnStepDone(const StepPlan& plan, const std::vector<SeqOutcome>& seqs,
                    const std::vector<RequestOutcome>& requests);

  // Parallel sampling / beams: `child` becomes a sequence of `request`, sharing `parent`'s blocks
  // (KvSpace::Fork) and token counts. DropSequence frees a sequence (a pruned beam).
  Status ForkSequence(RequestId request, int64_t parent, int64_t child);
  Status DropSequence(RequestId request, int64_t seq);

  RequestState State(RequestId id) const;
  bool Contains(RequestId id) const;
  // Live sequences of a request, in creation order.
  std::vector<int64_t> Sequences(RequestId id) const;
  int64_t NumTokens(int64_t seq) const;
  int64_t NumComputed(int64_t seq) const;
  SchedulerStats Stats() const;
  bool HasWork() const;

  // Every request is in exactly one queue; token counts and KV capacity agree; budgets hold.
  Status CheckInvariants() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvforge::sched
