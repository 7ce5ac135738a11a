// tests/sched/sched_harness.h — drives a Scheduler over a FakeKvSpace step by step with a fake
// model, keeps a reference model of every live request (its sequences and their token counts),
// and checks the universal properties after every Schedule() and OnStepDone():
//   * the token budget and the sequence cap hold; decode chunks come before prefill chunks; no
//     sequence appears twice; every chunk starts at the sequence's computed count, stays within
//     its tokens, samples exactly when it reaches the end, and its KV slots are resident;
//   * Scheduler::CheckInvariants() and FakeKvSpace::CheckInvariants() pass;
//   * no request is lost or duplicated: the scheduler's live requests are exactly the model's,
//     each in one state, with the model's sequences and token counts;
//   * KV blocks balance: waiting requests hold nothing, swapped ones only host copies of exactly
//     their slots, running ones exactly their slots on the device; nothing else is held.
// The fake model appends one token to every sampled sequence (unless told otherwise), forks the
// other sequences of an n > 1 request right after its first sample (child id = first seq + k,
// during the step, like the engine), and finishes a request when every sequence has generated
// max_new_tokens or when the test says so (an EOS).
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <vector>

#include "sched/fake_kv_space.h"
#include "sched/scheduler.h"

namespace kvforge::sched::testing {

struct HarnessConfig {
  SchedulerConfig sched;
  int32_t num_blocks = 64;
  int32_t block_tokens = 4;
  int64_t swap_blocks = 0;
  // Each committed step is reported to ObserveStepCost as SyntheticStepMs(plan): a machine whose
  // steps cost exactly that, for decode-priority chunking (max_itl_ms).
  bool synthetic_step_cost = false;
};

// 1.5 ms per step, 0.75 per decode token, 0.2 per prefill token, 0.001 per attention pair.
double SyntheticStepMs(const StepPlan& plan);

// The reference model of one live request.
struct ModelRequest {
  NewRequest spec;
  std::map<int64_t, int64_t> tokens;  // seq -> num_tokens
  bool forked = false;
};

// What the fake model does after the forward of one step.
struct StepActions {
  std::vector<RequestId> finish;     // EOS: these requests finish
  std::vector<RequestId> abort_mid;  // aborted after the forward, before OnStepDone
  std::vector<int64_t> no_token;     // sampled sequences that get no token this step
};

class Harness {
 public:
  explicit Harness(const HarnessConfig& config);

  Scheduler& sched() { return sched_; }
  FakeKvSpace& kv() { return kv_; }
  const HarnessConfig& config() const { return config_; }
  const std::map<RequestId, ModelRequest>& live() const { return live_; }

  // Forward to the scheduler and update the model on success.
  Status Add(const NewRequest& r);
  Status Abort(RequestId id);
  Status Drop(RequestId id, int64_t seq);
  // Schedule() plus the universal plan checks (gtest failures).
  StepPlan Schedule();
  // Runs the fake model over `plan` and commits it with OnStepDone (which must succeed).
  void Complete(const StepPlan& plan, const StepActions& actions = {});
  StepPlan Step(const StepActions& actions = {});

  // Every universal property of the current state (gtest failures).
  void CheckState();
  std::vector<RequestId> InState(RequestState state) const;  // sorted
  int64_t num_finished() const { return num_finished_; }

 private:
  void CheckPlan(const StepPlan& plan);
  void CheckItlTarget(const StepPlan& plan);
  int64_t ttft_lifted_seen_ = 0;  // Stats().num_ttft_lifted_steps at the last check

  HarnessConfig config_;
  FakeKvSpace kv_;
  Scheduler sched_;
  std::map<RequestId, ModelRequest> live_;
  std::vector<RequestId> just_retired_;  // checked (gone) by the next CheckState
  int64_t last_step_ = 0;
  int64_t num_finished_ = 0;
};

// --- Table-driven scenarios (TensorRT-LLM style) ---------------------------------------------

struct ChunkSpec {
  int64_t seq = 0;
  int64_t pos0 = 0;
  int64_t num_tokens = 0;
  bool operator==(const ChunkSpec&) const = default;
};
std::ostream& operator<<(std::ostream& os, const ChunkSpec& c);

// One step: what arrives / is aborted before Schedule(), what the plan must contain, the
// expected request sets right after Schedule(), and what the fake model does afterwards.
struct Row {
  std::vector<NewRequest> arrive = {};
  std::vector<RequestId> abort = {};
  std::vector<ChunkSpec> chunks = {};
  std::vector<RequestId> running = {};    // sorted
  std::vector<RequestId> preempted = {};  // in plan order
  std::vector<RequestId> swapped = {};    // sorted
  std::vector<RequestId> swapped_in = {};
  StepActions after = {};
};

// Runs the rows on a fresh harness (or on `h`), one step per row.
void RunScenario(const HarnessConfig& config, const std::vector<Row>& rows);
void RunRows(Harness* h, const std::vector<Row>& rows);

// A request with id `id`, first sequence `seq`.
NewRequest MakeReq(RequestId id, int64_t seq, int64_t prompt, int64_t max_new, int32_t priority = 0,
                   int32_t num_seqs = 1);

}  // namespace kvforge::sched::testing
