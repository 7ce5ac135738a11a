// Decode-priority chunking (SchedulerConfig::max_itl_ms) on a harness whose steps cost exactly
// SyntheticStepMs: once the scheduler's cost model has seen enough steps, a long prompt joining
// running decodes gets the largest chunk that keeps the step within the target (checked against
// a brute-force search over the true cost), smaller as the decodes grow; steps without decodes
// and configurations without the target are not cut; decodes that alone exceed the target still
// let min_prefill_chunk tokens through; a request whose first chunk does not fit waits; a prompt
// at risk of max_ttft_ms gets uncut steps.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "sched/sched_harness.h"

namespace kvforge::sched::testing {
namespace {

HarnessConfig ItlConfig(double max_itl_ms, int64_t min_chunk = 4) {
  HarnessConfig c;
  c.sched.max_num_batched_tokens = 512;
  c.sched.max_num_seqs = 32;
  c.sched.kv_watermark = 0.0;
  c.sched.max_itl_ms = max_itl_ms;
  c.sched.min_prefill_chunk = min_chunk;
  c.num_blocks = 1024;
  c.block_tokens = 4;
  c.synthetic_step_cost = true;
  return c;
}

// Runs four one-token requests with prompts of 20 to 200 tokens, one per step (prefill steps of
// varied size and attention), then starts `decoders` long-running requests (10-token prompts),
// one arrival per step, and steps until the cost model is ready.
void WarmUp(Harness* h, int decoders) {
  int64_t id = 1;
  for (int64_t prompt : {20, 60, 120, 200}) {
    ASSERT_TRUE(h->Add(MakeReq(id + 50, (id + 50) * 10, prompt, 1)).ok());
    h->Step();
    ++id;
  }
  for (id = 1; id <= decoders; ++id) {
    ASSERT_TRUE(h->Add(MakeReq(id, id * 10, 10, 400)).ok());
    h->Step();
  }
  for (int i = 0; i < StepCostModel::kMinSteps; ++i) h->Step();
  ASSERT_TRUE(h->sched().step_cost_model().ready());
}

// The largest prefill chunk (at position 0) that keeps a step of `plan`'s decodes within
// `target` at the true cost.
int64_t BruteForceChunk(const StepPlan& decodes, double target, int64_t max_tokens) {
  int64_t best = 0;
  for (int64_t n = 1; n <= max_tokens; ++n) {
    StepPlan p = decodes;
    p.chunks.push_back(
        {.request = 999, .seq = 9990, .pos0 = 0, .num_tokens = n, .is_prefill = true});
    if (SyntheticStepMs(p) <= target) best = n;
  }
  return best;
}

StepPlan DecodesOf(const StepPlan& plan) {
  StepPlan d;
  for (const ScheduledChunk& c : plan.chunks)
    if (!c.is_prefill) d.chunks.push_back(c);
  return d;
}

const ScheduledChunk* ChunkOf(const StepPlan& plan, int64_t seq) {
  for (const ScheduledChunk& c : plan.chunks)
    if (c.seq == seq) return &c;
  return nullptr;
}

// The first chunk a 400-token prompt gets when it arrives next to `decoders` decodes.
int64_t FirstChunkBeside(int decoders, double target) {
  Harness h(ItlConfig(target));
  WarmUp(&h, decoders);
  if (::testing::Test::HasFatalFailure()) return -1;
  EXPECT_TRUE(h.Add(MakeReq(100, 1000, 400, 2)).ok());
  // The costs are exact, so the tail factor only wobbles around 1; the plan is made against it.
  const double planned = target / h.sched().step_cost_model().tail_factor();
  EXPECT_NEAR(h.sched().step_cost_model().tail_factor(), 1.0, 0.05);
  const StepPlan plan = h.Step();
  const ScheduledChunk* c = ChunkOf(plan, 1000);
  EXPECT_NE(c, nullptr);
  if (c == nullptr) return -1;
  const int64_t expected = BruteForceChunk(DecodesOf(plan), planned, 400);
  EXPECT_NEAR(static_cast<double>(c->num_tokens), static_cast<double>(expected), 1.0)
      << decoders << " decoders";
  EXPECT_EQ(h.sched().Stats().num_itl_limited_steps, 1);
  return c->num_tokens;
}

TEST(SchedulerItl, PrefillBudgetShrinksAsDecodesGrow) {
  const int64_t at2 = FirstChunkBeside(2, 40);
  const int64_t at8 = FirstChunkBeside(8, 40);
  const int64_t at16 = FirstChunkBeside(16, 40);
  EXPECT_GT(at2, at8);
  EXPECT_GT(at8, at16);
  EXPECT_GT(at16, 4);  // still above the floor
}

TEST(SchedulerItl, AlongPromptFinishesInCutChunksWithinTheTarget) {
  Harness h(ItlConfig(30));
  WarmUp(&h, 6);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(h.Add(MakeReq(100, 1000, 400, 2)).ok());
  int64_t steps = 0;
  while (h.sched().NumComputed(1000) < 400 && steps < 100) {
    const StepPlan plan = h.Step();
    ++steps;
    EXPECT_LE(SyntheticStepMs(plan), 30 * 1.05) << "step " << plan.step;
  }
  EXPECT_EQ(h.sched().NumComputed(1000), 400);
  EXPECT_GT(steps, 2);  // 400 tokens at 0.2 ms each do not fit one 30 ms step
}

TEST(SchedulerItl, StepsWithoutDecodesAreNotCut) {
  Harness h(ItlConfig(10));
  WarmUp(&h, 4);
  ASSERT_FALSE(HasFatalFailure());
  for (RequestId id = 1; id <= 4; ++id) ASSERT_TRUE(h.Abort(id).ok());
  ASSERT_TRUE(h.Add(MakeReq(100, 1000, 400, 2)).ok());
  const StepPlan plan = h.Step();
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].num_tokens, 400);  // the whole token budget's worth
}

TEST(SchedulerItl, OffOrNotReadyMeansTheTokenBudgetAlone) {
  for (double target : {0.0, 10.0}) {
    HarnessConfig c = ItlConfig(target);
    c.synthetic_step_cost = target == 0.0;  // with a target, the model never learns: not ready
    Harness h(c);
    ASSERT_TRUE(h.Add(MakeReq(1, 10, 10, 100)).ok());
    h.Step();
    h.Step();
    ASSERT_TRUE(h.Add(MakeReq(2, 20, 400, 2)).ok());
    const StepPlan plan = h.Step();
    const ScheduledChunk* chunk = ChunkOf(plan, 20);
    ASSERT_NE(chunk, nullptr);
    EXPECT_EQ(chunk->num_tokens, 400) << "target " << target;
    EXPECT_EQ(h.sched().Stats().num_itl_limited_steps, 0);
  }
}

TEST(SchedulerItl, DecodesOverTheTargetStillLetTheFloorThrough) {
  // 8 decodes alone cost 1.5 + 8 x 0.75 = 7.5 ms > 7 ms. A quarter of the target (1.75 ms) holds
  // about 8 prefill tokens at 0.2 ms each, more than the floor of 6, so every step carries 6.
  Harness h(ItlConfig(7, /*min_chunk=*/6));
  WarmUp(&h, 8);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(h.Add(MakeReq(100, 1000, 30, 2)).ok());
  ASSERT_TRUE(h.Add(MakeReq(101, 1010, 30, 2)).ok());
  for (int i = 0; i < 5; ++i) {
    const StepPlan plan = h.Step();
    int64_t prefill_chunks = 0;
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.is_prefill) continue;
      ++prefill_chunks;
      EXPECT_EQ(c.seq, 1000);  // the first arrival only
      EXPECT_EQ(c.num_tokens, 6);
    }
    EXPECT_EQ(prefill_chunks, 1);
    // The second request's first chunk does not fit: it is not admitted yet.
    EXPECT_EQ(h.sched().State(101), RequestState::kWaiting);
  }
  EXPECT_EQ(h.sched().NumComputed(1000), 30);
}

TEST(SchedulerItl, AFloorThatWouldAddMoreThanAQuarterOfTheTargetShrinks) {
  // The same decodes over the target with a floor of 32: 32 tokens would add 6.4 ms to a 5 ms
  // target, so the floor is what fits in a quarter of it (1.25 ms at 0.2 ms a token plus
  // attention: 5 or 6 tokens), checked against the true cost.
  Harness h(ItlConfig(5, /*min_chunk=*/32));
  WarmUp(&h, 8);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_TRUE(h.Add(MakeReq(100, 1000, 60, 2)).ok());
  const double quarter = 5.0 * 0.25 / h.sched().step_cost_model().tail_factor();
  for (int i = 0; i < 4; ++i) {
    const int64_t pos0 = h.sched().NumComputed(1000);
    const StepPlan plan = h.Step();
    const ScheduledChunk* c = ChunkOf(plan, 1000);
    ASSERT_NE(c, nullptr);
    EXPECT_GE(c->num_tokens, 4);
    EXPECT_LE(c->num_tokens, 7);
    // What it adds to the step (0.2 ms a token, 0.001 ms a query-key pair) fits the quarter.
    const double added =
        0.2 * static_cast<double>(c->num_tokens) +
        0.001 * static_cast<double>(c->num_tokens * pos0 + c->num_tokens * (c->num_tokens + 1) / 2);
    EXPECT_LE(added, quarter * 1.05) << "chunk of " << c->num_tokens << " at " << pos0;
  }
}

// Steps a 400-token prompt beside 6 decodes takes to finish its prefill, the busy time from its
// arrival until then (true step costs) and the steps max_ttft_ms lifted the cut from.
struct PrefillRun {
  int64_t steps = 0;
  double busy_ms = 0;
  int64_t lifted = 0;
};

PrefillRun PrefillBesideDecodes(double max_itl_ms, double max_ttft_ms) {
  HarnessConfig c = ItlConfig(max_itl_ms);
  c.sched.max_ttft_ms = max_ttft_ms;
  Harness h(c);
  WarmUp(&h, 6);
  PrefillRun run;
  if (::testing::Test::HasFatalFailure()) return run;
  EXPECT_TRUE(h.Add(MakeReq(100, 1000, 400, 2)).ok());
  while (h.sched().NumComputed(1000) < 400 && run.steps < 200) {
    run.busy_ms += SyntheticStepMs(h.Step());
    ++run.steps;
  }
  EXPECT_EQ(h.sched().NumComputed(1000), 400);
  run.lifted = h.sched().Stats().num_ttft_lifted_steps;
  return run;
}

TEST(SchedulerItl, APromptAtRiskOfTheTtftTargetGetsUncutSteps) {
  // 400 tokens at 0.2 ms each plus their attention are ~160 ms of prefill; a 12 ms target beside
  // 6 decodes (6 ms) cuts them into steps of ~6 ms of prefill, over 300 ms in all. With
  // max_ttft_ms 250 the cut holds while the prompt's age plus its remaining prefill stays under
  // 250 ms (not at first: 160 < 250), then the rest runs uncut.
  const PrefillRun cut = PrefillBesideDecodes(12, 0);
  const PrefillRun far = PrefillBesideDecodes(12, 1e9);  // never at risk: the same as no target
  const PrefillRun lifted = PrefillBesideDecodes(12, 250);
  EXPECT_EQ(cut.lifted, 0);
  EXPECT_EQ(far.lifted, 0);
  EXPECT_EQ(far.steps, cut.steps);
  EXPECT_GT(lifted.lifted, 0);
  EXPECT_LT(lifted.steps, cut.steps);
  EXPECT_GT(cut.busy_ms, 250.0) << cut.steps << " steps";  // the first token would come late
  // With it, the prefill ends within the target (the lift's own step may straddle it).
  EXPECT_LE(lifted.busy_ms, 250.0 * 1.1) << lifted.steps << " steps";
  EXPECT_GT(lifted.steps, 1);  // not lifted at once: 160 ms of prefill was not yet at risk
}

TEST(SchedulerItl, ANegativeOrInfiniteTtftTargetIsRefused) {
  for (double bad : {-1.0, std::numeric_limits<double>::infinity()}) {
    SchedulerConfig s;
    s.max_ttft_ms = bad;
    EXPECT_FALSE(s.Validate().ok()) << bad;
  }
}

}  // namespace
}  // namespace kvforge::sched::testing
