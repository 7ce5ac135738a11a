// API-contract tests for sched::Scheduler: config validation, AddRequest errors (bad fields,
// duplicates, never fits), OnStepDone validation (stale plans, bad outcomes, all-or-nothing),
// discarded plans, ForkSequence / DropSequence preconditions (also during a step, as the engine
// uses them), late tokens for beams waiting on siblings, queries and the destructor.
#include <gtest/gtest.h>

#include <vector>

#include "sched/fake_kv_space.h"
#include "sched/sched_harness.h"
#include "sched/scheduler.h"

namespace kvforge::sched::testing {
namespace {

SchedulerConfig Config(int64_t budget = 64, int64_t max_seqs = 8) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.kv_watermark = 0.0;
  return c;
}

StatusCode CodeOf(const Status& s) { return s.code(); }

TEST(SchedulerConfigTest, Validate) {
  EXPECT_TRUE(SchedulerConfig{}.Validate().ok());
  SchedulerConfig c;
  c.max_num_batched_tokens = 0;
  EXPECT_EQ(CodeOf(c.Validate()), StatusCode::kInvalidArgument);
  c = SchedulerConfig{};
  c.max_num_seqs = 0;
  EXPECT_FALSE(c.Validate().ok());
  c = SchedulerConfig{};
  c.long_prefill_token_threshold = -1;
  EXPECT_FALSE(c.Validate().ok());
  c = SchedulerConfig{};
  c.max_wait_steps = -1;
  EXPECT_FALSE(c.Validate().ok());
  c = SchedulerConfig{};
  c.kv_watermark = 1.0;
  EXPECT_FALSE(c.Validate().ok());
  c.kv_watermark = -0.1;
  EXPECT_FALSE(c.Validate().ok());
}

TEST(SchedulerApiTest, AddRequestRejectsBadFieldsAndDuplicates) {
  FakeKvSpace kv(16, 4, 0);
  SchedulerConfig cfg = Config(64, 4);
  Scheduler s(cfg, &kv);
  EXPECT_EQ(CodeOf(s.AddRequest(MakeReq(1, 10, 0, 1))), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(s.AddRequest(MakeReq(1, 10, 4, 0))), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(s.AddRequest(MakeReq(1, 10, 4, 1, 0, 0))), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(s.AddRequest(MakeReq(1, 10, 4, 1, 0, 5))), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.AddRequest(MakeReq(1, 10, 4, 1)).ok());
  EXPECT_EQ(CodeOf(s.AddRequest(MakeReq(1, 20, 4, 1))), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(s.AddRequest(MakeReq(2, 10, 4, 1))), StatusCode::kInvalidArgument);
  EXPECT_TRUE(s.AddRequest(MakeReq(2, 20, 4, 1)).ok());
  EXPECT_TRUE(s.CheckInvariants().ok());
  EXPECT_EQ(s.Stats().num_waiting, 2);
}

TEST(SchedulerApiTest, AddRequestRejectsWhatCouldNeverFit) {
  FakeKvSpace kv(16, 4, 0);  // 64 token slots
  Scheduler s(Config(), &kv);
  EXPECT_TRUE(s.AddRequest(MakeReq(1, 10, 60, 4)).ok());  // exactly the whole cache
  EXPECT_EQ(CodeOf(s.AddRequest(MakeReq(2, 20, 60, 5))), StatusCode::kResourceExhausted);
  EXPECT_EQ(CodeOf(s.AddRequest(MakeReq(3, 30, 100, 1))), StatusCode::kResourceExhausted);
  // n sequences may each need prompt + max_new_tokens of their own (recompute after forking).
  EXPECT_TRUE(s.AddRequest(MakeReq(4, 40, 16, 16, 0, 2)).ok());  // 2 x 8 blocks
  EXPECT_EQ(CodeOf(s.AddRequest(MakeReq(5, 50, 16, 17, 0, 2))), StatusCode::kResourceExhausted);
  EXPECT_FALSE(s.Contains(2));
  EXPECT_FALSE(s.Contains(5));
}

TEST(SchedulerApiTest, WithoutChunkedPrefillPromptsAboveTheBudgetAreRejected) {
  FakeKvSpace kv(64, 4, 0);
  SchedulerConfig cfg = Config(8, 4);
  cfg.chunked_prefill = false;
  Scheduler s(cfg, &kv);
  EXPECT_TRUE(s.AddRequest(MakeReq(1, 10, 8, 40)).ok());
  EXPECT_EQ(CodeOf(s.AddRequest(MakeReq(2, 20, 9, 1))), StatusCode::kInvalidArgument);
}

TEST(SchedulerApiTest, QueriesForUnknownIds) {
  FakeKvSpace kv(16, 4, 0);
  Scheduler s(Config(), &kv);
  EXPECT_FALSE(s.Contains(7));
  EXPECT_EQ(s.State(7), RequestState::kFinished);
  EXPECT_TRUE(s.Sequences(7).empty());
  EXPECT_EQ(s.NumTokens(70), -1);
  EXPECT_EQ(s.NumComputed(70), -1);
  EXPECT_EQ(s.NumKvSlots(70), -1);
  EXPECT_EQ(CodeOf(s.Abort(7)), StatusCode::kNotFound);
  EXPECT_FALSE(s.HasWork());
  EXPECT_TRUE(s.Schedule().empty());
  EXPECT_EQ(s.Stats().num_steps, 1);
}

TEST(SchedulerApiTest, OnlyTheLatestPlanCanBeCommittedOnce) {
  FakeKvSpace kv(16, 4, 0);
  Scheduler s(Config(4, 4), &kv);
  ASSERT_TRUE(s.AddRequest(MakeReq(1, 10, 6, 2)).ok());
  const StepPlan p1 = s.Schedule();
  const StepPlan p2 = s.Schedule();  // p1 discarded: the same span is planned again
  ASSERT_EQ(p1.chunks.size(), 1u);
  ASSERT_EQ(p2.chunks.size(), 1u);
  EXPECT_EQ(p2.chunks[0].pos0, 0);
  EXPECT_EQ(p2.chunks[0].num_tokens, 4);
  EXPECT_EQ(p2.step, p1.step + 1);
  EXPECT_EQ(CodeOf(s.OnStepDone(p1, {}, {})), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.NumComputed(10), 0);
  EXPECT_TRUE(s.OnStepDone(p2, {}, {}).ok());
  EXPECT_EQ(s.NumComputed(10), 4);
  EXPECT_EQ(CodeOf(s.OnStepDone(p2, {}, {})), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.NumComputed(10), 4);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(SchedulerApiTest, OnStepDoneValidatesEverythingBeforeChangingAnything) {
  FakeKvSpace kv(16, 4, 0);
  Scheduler s(Config(4, 4), &kv);
  ASSERT_TRUE(s.AddRequest(MakeReq(1, 10, 6, 2)).ok());
  const StepPlan p = s.Schedule();  // [0, 4) of 6: no sample
  ASSERT_FALSE(p.chunks[0].sample);
  // A token for a sequence that still has uncomputed prompt tokens.
  EXPECT_EQ(CodeOf(s.OnStepDone(p, {{10, true}}, {})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(s.OnStepDone(p, {{99, true}}, {})), StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(s.OnStepDone(p, {{10, false}, {10, false}}, {})), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(s.OnStepDone(p, {}, {{42, true}})), StatusCode::kNotFound);
  EXPECT_EQ(s.NumComputed(10), 0);
  EXPECT_EQ(s.NumTokens(10), 6);
  ASSERT_TRUE(s.OnStepDone(p, {}, {}).ok());

  const StepPlan q = s.Schedule();  // [4, 6): samples
  ASSERT_TRUE(q.chunks[0].sample);
  ASSERT_TRUE(s.OnStepDone(q, {{10, true}}, {{1, false}}).ok());
  EXPECT_EQ(s.NumTokens(10), 7);
  const StepPlan r = s.Schedule();
  ASSERT_TRUE(s.OnStepDone(r, {{10, true}}, {}).ok());  // 2nd token: max_new_tokens reached
  EXPECT_EQ(s.NumTokens(10), 8);
  const StepPlan t = s.Schedule();
  EXPECT_TRUE(t.empty()) << "a sequence that generated max_new_tokens is not scheduled";
  EXPECT_EQ(CodeOf(s.OnStepDone(t, {{10, true}}, {})), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.OnStepDone(t, {}, {{1, true}}).ok());
  EXPECT_FALSE(s.Contains(1));
  EXPECT_EQ(kv.num_free_blocks(), 16);
}

TEST(SchedulerApiTest, ForkPreconditions) {
  FakeKvSpace kv(16, 4, 0);
  Scheduler s(Config(4, 4), &kv);
  ASSERT_TRUE(s.AddRequest(MakeReq(1, 10, 6, 3, 0, 2)).ok());
  ASSERT_TRUE(s.AddRequest(MakeReq(2, 20, 4, 3)).ok());
  EXPECT_EQ(CodeOf(s.ForkSequence(1, 10, 11)), StatusCode::kInvalidArgument);  // waiting
  EXPECT_EQ(CodeOf(s.ForkSequence(9, 10, 11)), StatusCode::kNotFound);
  const StepPlan p = s.Schedule();  // [0, 4) of 10's 6-token prompt
  EXPECT_EQ(CodeOf(s.ForkSequence(1, 10, 11)), StatusCode::kInvalidArgument);  // mid-prefill
  EXPECT_EQ(CodeOf(s.ForkSequence(1, 20, 11)), StatusCode::kNotFound);         // not its sequence
  ASSERT_TRUE(s.OnStepDone(p, {}, {}).ok());
  const StepPlan q = s.Schedule();  // [4, 6): samples
  ASSERT_TRUE(q.chunks[0].sample);
  // During the step, after the forward: the child inherits the chunk.
  ASSERT_TRUE(s.ForkSequence(1, 10, 11).ok());
  EXPECT_EQ(CodeOf(s.ForkSequence(1, 10, 11)), StatusCode::kInvalidArgument);  // duplicate
  EXPECT_EQ(CodeOf(s.ForkSequence(1, 10, 20)), StatusCode::kInvalidArgument);  // taken id
  ASSERT_TRUE(s.OnStepDone(q, {{10, true}, {11, true}}, {}).ok());
  EXPECT_EQ(s.NumComputed(11), 6);
  EXPECT_EQ(s.NumTokens(11), 7);
  EXPECT_EQ(s.Sequences(1), (std::vector<int64_t>{10, 11}));
  // Between steps the parent's last (sampled) token is not computed yet; the child shares it
  // and computes it itself (the engine may give it another token value).
  ASSERT_TRUE(s.ForkSequence(1, 11, 12).ok());
  EXPECT_EQ(s.NumComputed(12), 6);
  EXPECT_EQ(s.NumTokens(12), 7);
  EXPECT_TRUE(s.CheckInvariants().ok());
  EXPECT_TRUE(kv.CheckInvariants().ok());
  const StepPlan r = s.Schedule();  // three decodes, then 1 token of request 2's prompt
  ASSERT_EQ(r.chunks.size(), 4u);
  EXPECT_EQ(r.chunks[2].seq, 12);
  EXPECT_EQ(r.chunks[3].seq, 20);
  EXPECT_TRUE(s.OnStepDone(r, {{10, true}, {11, true}, {12, true}}, {}).ok());
}

TEST(SchedulerApiTest, ForkAfterADiscardedPlanInheritsTheLatestPlan) {
  FakeKvSpace kv(16, 4, 0);
  Scheduler s(Config(4, 4), &kv);
  ASSERT_TRUE(s.AddRequest(MakeReq(1, 10, 4, 3, 0, 2)).ok());
  const StepPlan p = s.Schedule();
  ASSERT_TRUE(s.OnStepDone(p, {{10, true}}, {}).ok());  // prefill + first token, no fork yet
  (void)s.Schedule();               // the decode of slot 4 is planned, then the plan is dropped
  const StepPlan q = s.Schedule();  // the same decode again
  ASSERT_EQ(q.chunks.size(), 1u);
  EXPECT_EQ(q.chunks[0].pos0, 4);
  EXPECT_EQ(s.NumKvSlots(10), 5);
  // After q's forward: the child shares slot 4, written by the forward, and advances with q.
  ASSERT_TRUE(s.ForkSequence(1, 10, 11).ok());
  ASSERT_TRUE(s.OnStepDone(q, {{10, true}, {11, true}}, {}).ok());
  EXPECT_EQ(s.NumComputed(11), 5);
  EXPECT_EQ(s.NumTokens(11), 6);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(SchedulerApiTest, DropSequence) {
  Harness h({.sched = Config(64, 4), .num_blocks = 16, .block_tokens = 4});
  ASSERT_TRUE(h.Add(MakeReq(1, 10, 5, 4, 0, 3)).ok());
  h.Step();  // prefill, forks 11 and 12
  Scheduler& s = h.sched();
  EXPECT_EQ(CodeOf(s.DropSequence(1, 99)), StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(s.DropSequence(9, 10)), StatusCode::kNotFound);
  const int64_t free_before = h.kv().num_free_blocks();
  const StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 3u);
  // During the step: 12's chunk is then ignored, and its outcome too.
  ASSERT_TRUE(s.DropSequence(1, 12).ok());
  EXPECT_FALSE(h.kv().IsResident(12));
  ASSERT_TRUE(s.OnStepDone(p, {{10, true}, {11, true}, {12, true}}, {}).ok());
  EXPECT_EQ(s.Sequences(1), (std::vector<int64_t>{10, 11}));
  ASSERT_TRUE(s.DropSequence(1, 11).ok());
  EXPECT_EQ(CodeOf(s.DropSequence(1, 10)), StatusCode::kInvalidArgument);  // the last one
  EXPECT_GT(h.kv().num_free_blocks(), free_before - 3);
  EXPECT_TRUE(s.CheckInvariants().ok());
  EXPECT_TRUE(h.kv().CheckInvariants().ok());
  EXPECT_EQ(CodeOf(s.OnStepDone(p, {}, {})), StatusCode::kInvalidArgument);
}

TEST(SchedulerApiTest, ABeamWaitingForItsSiblingsGetsItsTokenLater) {
  FakeKvSpace kv(16, 4, 0);
  Scheduler s(Config(64, 4), &kv);
  ASSERT_TRUE(s.AddRequest(MakeReq(1, 10, 4, 5, 0, 2)).ok());
  const StepPlan p = s.Schedule();
  ASSERT_TRUE(s.ForkSequence(1, 10, 11).ok());
  ASSERT_TRUE(s.OnStepDone(p, {{10, true}, {11, true}}, {}).ok());
  const StepPlan q = s.Schedule();
  ASSERT_EQ(q.chunks.size(), 2u);
  // Only 10 gets its token; 11 has nothing to run until it gets one.
  ASSERT_TRUE(s.OnStepDone(q, {{10, true}, {11, false}}, {}).ok());
  const StepPlan r = s.Schedule();
  ASSERT_EQ(r.chunks.size(), 1u);
  EXPECT_EQ(r.chunks[0].seq, 10);
  // 11 is at a sampling point, so it may get its token although it is not in this plan.
  ASSERT_TRUE(s.OnStepDone(r, {{10, true}, {11, true}}, {}).ok());
  EXPECT_EQ(s.NumTokens(10), 7);
  EXPECT_EQ(s.NumTokens(11), 6);
  EXPECT_EQ(s.Schedule().chunks.size(), 2u);
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(SchedulerApiTest, AbortDuringAStepIgnoresItsChunksAndOutcomes) {
  FakeKvSpace kv(16, 4, 0);
  Scheduler s(Config(64, 4), &kv);
  ASSERT_TRUE(s.AddRequest(MakeReq(1, 10, 4, 5)).ok());
  ASSERT_TRUE(s.AddRequest(MakeReq(2, 20, 4, 5)).ok());
  const StepPlan p = s.Schedule();
  ASSERT_TRUE(s.Abort(1).ok());
  EXPECT_FALSE(kv.IsResident(10));
  ASSERT_TRUE(s.OnStepDone(p, {{10, true}, {20, true}}, {{1, true}, {2, false}}).ok());
  EXPECT_EQ(s.NumTokens(20), 5);
  EXPECT_FALSE(s.Contains(1));
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(SchedulerApiTest, FinishingAWaitingRequestRetiresIt) {
  FakeKvSpace kv(16, 4, 0);
  Scheduler s(Config(4, 1), &kv);
  ASSERT_TRUE(s.AddRequest(MakeReq(1, 10, 4, 5)).ok());
  ASSERT_TRUE(s.AddRequest(MakeReq(2, 20, 4, 5)).ok());
  const StepPlan p = s.Schedule();
  EXPECT_EQ(s.State(2), RequestState::kWaiting);
  ASSERT_TRUE(s.OnStepDone(p, {{10, true}}, {{2, true}}).ok());  // e.g. a client stop
  EXPECT_FALSE(s.Contains(2));
  EXPECT_TRUE(s.CheckInvariants().ok());
}

TEST(SchedulerApiTest, DestructorReturnsEveryBlock) {
  FakeKvSpace kv(6, 4, 8);
  {
    SchedulerConfig cfg = Config(64, 4);
    cfg.preemption_mode = PreemptionMode::kSwap;
    Scheduler s(cfg, &kv);
    ASSERT_TRUE(s.AddRequest(MakeReq(1, 10, 8, 8)).ok());
    ASSERT_TRUE(s.AddRequest(MakeReq(2, 20, 8, 8)).ok());
    ASSERT_TRUE(s.AddRequest(MakeReq(3, 30, 4, 8)).ok());
    for (int i = 0; i < 6; ++i) {
      const StepPlan p = s.Schedule();
      std::vector<SeqOutcome> out;
      for (const ScheduledChunk& c : p.chunks) {
        if (c.sample) out.push_back({c.seq, true});
      }
      ASSERT_TRUE(s.OnStepDone(p, out, {}).ok());
    }
    EXPECT_GE(s.Stats().num_swapped, 1);
    EXPECT_GT(kv.swap_blocks_used(), 0);
  }
  EXPECT_EQ(kv.num_free_blocks(), 6);
  EXPECT_EQ(kv.swap_blocks_used(), 0);
  EXPECT_TRUE(kv.CheckInvariants().ok());
}

TEST(SchedulerApiTest, StatsCountPreemptionsAndSequences) {
  Harness h({.sched = Config(64, 4), .num_blocks = 6, .block_tokens = 4});
  ASSERT_TRUE(h.Add(MakeReq(1, 10, 8, 8)).ok());
  ASSERT_TRUE(h.Add(MakeReq(2, 20, 8, 8)).ok());
  for (int i = 0; i < 6; ++i) h.Step();
  const SchedulerStats st = h.sched().Stats();
  EXPECT_EQ(st.num_steps, 6);
  EXPECT_EQ(st.num_running, 1);
  EXPECT_EQ(st.num_waiting, 1);
  EXPECT_EQ(st.num_running_seqs, 1);
  EXPECT_EQ(st.num_preemptions, 1);
  EXPECT_EQ(st.num_recomputed_tokens, 12);
}

}  // namespace
}  // namespace kvforge::sched::testing

namespace kvforge::sched::testing {
namespace {

// Speculative decoding's draft slots: an offer lengthens the next decode chunk (within the
// budget and max_new_tokens), the kept drafts count as computed and as tokens, the rejected
// slots are released, and a bad count of kept drafts is refused.
TEST(SchedulerApiTest, DraftSlotsAreGrantedCommittedAndReleased) {
  FakeKvSpace kv(16, 4, 0);
  Scheduler s(Config(64, 4), &kv);
  ASSERT_TRUE(s.AddRequest(MakeReq(1, 10, 6, 8)).ok());
  StepPlan p = s.Schedule();  // the prompt
  ASSERT_TRUE(s.OnStepDone(p, {{10, true}}, {{1, false}}).ok());
  s.OfferDrafts(10, 5, 0.9);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].pos0, 6);
  EXPECT_EQ(p.chunks[0].num_tokens, 6);  // the last token and 5 draft slots
  EXPECT_EQ(p.chunks[0].draft_tokens, 5);
  EXPECT_EQ(s.NumKvSlots(10), 12);
  // A count above the slots is refused, nothing changes.
  EXPECT_EQ(s.OnStepDone(p, {{10, true, 6}}, {{1, false}}).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.OnStepDone(p, {{10, true, 2}}, {{1, false}}).ok());
  EXPECT_EQ(s.NumComputed(10), 9);  // 6 + the last token + 2 kept drafts
  EXPECT_EQ(s.NumTokens(10), 10);   // and the sampled token after them
  EXPECT_EQ(s.NumKvSlots(10), 9);
  EXPECT_EQ(kv.Slots(10), 9);
  ASSERT_TRUE(s.CheckInvariants().ok());
  ASSERT_TRUE(kv.CheckInvariants().ok());
  // 4 of 8 new tokens generated: at most 8 - 4 - 1 = 3 drafts, whatever the offer.
  s.OfferDrafts(10, 7, 0.9);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].draft_tokens, 3);
  // No offer this time: the plan is redone without draft slots.
  p = s.Schedule();
  EXPECT_EQ(p.chunks[0].draft_tokens, 0);
  EXPECT_EQ(p.chunks[0].num_tokens, 1);
  ASSERT_TRUE(s.OnStepDone(p, {{10, true}}, {{1, false}}).ok());
  EXPECT_EQ(s.Stats().num_draft_slots, 8);
  ASSERT_TRUE(s.CheckInvariants().ok());
}

}  // namespace
}  // namespace kvforge::sched::testing
