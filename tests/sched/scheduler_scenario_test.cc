// Table-driven scenario tests for sched::Scheduler (TensorRT-LLM style): each row is one step
// with its arrivals/aborts, the exact chunks (seq, pos0, num_tokens) the plan must hold in
// order, the running set, the preempted / swapped / swapped-in requests, and what the fake model
// does after the forward. The harness also checks the universal properties on every step
// (budget, sequence cap, invariants, KV balance, no request lost or duplicated).
//
// Unless a test says otherwise: block_tokens 4, watermark 0, FCFS, recompute preemption; the fake
// model appends one token per sampled sequence and finishes a request when it has generated
// max_new_tokens. MakeReq(id, first seq, prompt, max_new, priority = 0, num_seqs = 1).
#include <gtest/gtest.h>

#include <vector>

#include "sched/sched_harness.h"

namespace kvforge::sched::testing {
namespace {

HarnessConfig Cfg(int64_t budget, int64_t max_seqs, int32_t num_blocks) {
  HarnessConfig c;
  c.sched.max_num_batched_tokens = budget;
  c.sched.max_num_seqs = max_seqs;
  c.sched.kv_watermark = 0.0;
  c.num_blocks = num_blocks;
  c.block_tokens = 4;
  return c;
}

TEST(SchedulerScenario, BudgetChunkedPrefillAndDecodeFirst) {
  // Budget 8: A's 10-token prompt is split 8 + 2; B waits for budget; decodes come first and a
  // late long prompt (C) only gets what the decodes leave.
  RunScenario(Cfg(8, 4, 64), {
                                 {.arrive = {MakeReq(1, 10, 10, 3), MakeReq(2, 20, 3, 2)},
                                  .chunks = {{10, 0, 8}},
                                  .running = {1}},
                                 {.chunks = {{10, 8, 2}, {20, 0, 3}}, .running = {1, 2}},
                                 {.arrive = {MakeReq(3, 30, 20, 1)},
                                  .chunks = {{10, 10, 1}, {20, 3, 1}, {30, 0, 6}},
                                  .running = {1, 2, 3}},
                                 {.chunks = {{10, 11, 1}, {30, 6, 7}}, .running = {1, 3}},
                                 {.chunks = {{30, 13, 7}}, .running = {3}},
                                 {.chunks = {}, .running = {}},
                             });
}

TEST(SchedulerScenario, LongPrefillThresholdCapsChunks) {
  HarnessConfig c = Cfg(16, 4, 64);
  c.sched.long_prefill_token_threshold = 4;
  RunScenario(c, {
                     {.arrive = {MakeReq(1, 10, 10, 2), MakeReq(2, 20, 6, 1)},
                      .chunks = {{10, 0, 4}, {20, 0, 4}},
                      .running = {1, 2}},
                     {.chunks = {{10, 4, 4}, {20, 4, 2}}, .running = {1, 2}},
                     {.chunks = {{10, 8, 2}}, .running = {1}},
                     {.chunks = {{10, 10, 1}}, .running = {1}},
                     {.chunks = {}, .running = {}},
                 });
}

TEST(SchedulerScenario, WithoutChunkedPrefillAPromptRunsWhole) {
  HarnessConfig c = Cfg(8, 4, 64);
  c.sched.chunked_prefill = false;
  RunScenario(c, {
                     // B's 5 tokens do not fit next to A's 6 in a budget of 8: B waits.
                     {.arrive = {MakeReq(1, 10, 6, 2), MakeReq(2, 20, 5, 1)},
                      .chunks = {{10, 0, 6}},
                      .running = {1}},
                     {.chunks = {{10, 6, 1}, {20, 0, 5}}, .running = {1, 2}},
                     {.chunks = {}, .running = {}},
                 });
}

TEST(SchedulerScenario, AdmissionWaitsForBlocksAndWatermark) {
  // 8 blocks of 4 tokens. A takes 4 blocks (+1 to decode), B needs 3.
  const std::vector<NewRequest> arrivals = {MakeReq(1, 10, 16, 4), MakeReq(2, 20, 12, 1)};
  // Without a watermark both fit at once.
  RunScenario(Cfg(64, 4, 8),
              {
                  {.arrive = arrivals, .chunks = {{10, 0, 16}, {20, 0, 12}}, .running = {1, 2}},
                  {.chunks = {{10, 16, 1}}, .running = {1}},
                  {.chunks = {{10, 17, 1}}, .running = {1}},
                  {.chunks = {{10, 18, 1}}, .running = {1}},
                  {.chunks = {}, .running = {}},
              });
  // A 25% watermark (2 blocks) keeps B out until A is done.
  HarnessConfig c = Cfg(64, 4, 8);
  c.sched.kv_watermark = 0.25;
  RunScenario(c, {
                     {.arrive = arrivals, .chunks = {{10, 0, 16}}, .running = {1}},
                     {.chunks = {{10, 16, 1}}, .running = {1}},
                     {.chunks = {{10, 17, 1}}, .running = {1}},
                     {.chunks = {{10, 18, 1}}, .running = {1}},
                     {.chunks = {{20, 0, 12}}, .running = {2}},
                     {.chunks = {}, .running = {}},
                 });
}

TEST(SchedulerScenario, SequenceCapLimitsAdmission) {
  RunScenario(Cfg(64, 2, 64),
              {
                  {.arrive = {MakeReq(1, 10, 4, 2), MakeReq(2, 20, 4, 2), MakeReq(3, 30, 4, 2)},
                   .chunks = {{10, 0, 4}, {20, 0, 4}},
                   .running = {1, 2}},
                  {.chunks = {{10, 4, 1}, {20, 4, 1}}, .running = {1, 2}},
                  {.chunks = {{30, 0, 4}}, .running = {3}},
                  {.chunks = {{30, 4, 1}}, .running = {3}},
                  {.chunks = {}, .running = {}},
              });
}

// Two 8-token prompts decoding in 6 blocks: at step 6 A needs a 4th block and the latest
// arrival (B) is preempted.
std::vector<Row> SharedPrefix() {
  return {
      {.arrive = {MakeReq(1, 10, 8, 8), MakeReq(2, 20, 8, 8)},
       .chunks = {{10, 0, 8}, {20, 0, 8}},
       .running = {1, 2}},
      {.chunks = {{10, 8, 1}, {20, 8, 1}}, .running = {1, 2}},
      {.chunks = {{10, 9, 1}, {20, 9, 1}}, .running = {1, 2}},
      {.chunks = {{10, 10, 1}, {20, 10, 1}}, .running = {1, 2}},
      {.chunks = {{10, 11, 1}, {20, 11, 1}}, .running = {1, 2}},
  };
}

std::vector<Row> Concat(std::vector<Row> a, const std::vector<Row>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(SchedulerScenario, PreemptionByRecompute) {
  Harness h(Cfg(64, 4, 6));
  RunRows(&h, Concat(SharedPrefix(),
                     {
                         {.chunks = {{10, 12, 1}}, .running = {1}, .preempted = {2}},
                         // B (front of the queue) needs 4 blocks for its 13 tokens; 2 are free.
                         {.chunks = {{10, 13, 1}}, .running = {1}},
                         {.chunks = {{10, 14, 1}}, .running = {1}},
                         // B's 5 generated tokens are recomputed with its prompt.
                         {.chunks = {{20, 0, 13}}, .running = {2}},
                         {.chunks = {{20, 13, 1}}, .running = {2}},
                         {.chunks = {{20, 14, 1}}, .running = {2}},
                         {.chunks = {}, .running = {}},
                     }));
  EXPECT_EQ(h.num_finished(), 2);
  EXPECT_EQ(h.sched().Stats().num_preemptions, 1);
  EXPECT_EQ(h.sched().Stats().num_recomputed_tokens, 12);
}

TEST(SchedulerScenario, PreemptionBySwapAndSwapIn) {
  HarnessConfig c = Cfg(64, 4, 6);
  c.sched.preemption_mode = PreemptionMode::kSwap;
  c.swap_blocks = 8;
  Harness h(c);
  RunRows(&h,
          Concat(SharedPrefix(),
                 {
                     {.chunks = {{10, 12, 1}}, .running = {1}, .preempted = {2}, .swapped = {2}},
                     // Swap-in needs 3 blocks + 1 to grow; 2 are free.
                     {.chunks = {{10, 13, 1}}, .running = {1}, .swapped = {2}},
                     {.chunks = {{10, 14, 1}}, .running = {1}, .swapped = {2}},
                     // B resumes where it stopped: no recompute.
                     {.chunks = {{20, 12, 1}}, .running = {2}, .swapped_in = {2}},
                     {.chunks = {{20, 13, 1}}, .running = {2}},
                     {.chunks = {{20, 14, 1}}, .running = {2}},
                     {.chunks = {}, .running = {}},
                 }));
  EXPECT_EQ(h.kv().num_swap_outs(), 1);
  EXPECT_EQ(h.kv().num_swap_ins(), 1);
  EXPECT_EQ(h.sched().Stats().num_swap_preemptions, 1);
  EXPECT_EQ(h.sched().Stats().num_recomputed_tokens, 0);
  EXPECT_EQ(h.kv().swap_blocks_used(), 0);
}

TEST(SchedulerScenario, SwapFallsBackToRecomputeWhenTheSwapAreaIsFull) {
  HarnessConfig c = Cfg(64, 4, 6);
  c.sched.preemption_mode = PreemptionMode::kSwap;
  c.swap_blocks = 2;  // B's 3 blocks do not fit
  Harness h(c);
  RunRows(&h,
          Concat(SharedPrefix(), {
                                     {.chunks = {{10, 12, 1}}, .running = {1}, .preempted = {2}},
                                     {.chunks = {{10, 13, 1}}, .running = {1}},
                                     {.chunks = {{10, 14, 1}}, .running = {1}},
                                     {.chunks = {{20, 0, 13}}, .running = {2}},
                                 }));
  EXPECT_EQ(h.kv().num_swap_outs(), 0);
  EXPECT_EQ(h.sched().Stats().num_swap_preemptions, 0);
  EXPECT_EQ(h.sched().Stats().num_recomputed_tokens, 12);
}

TEST(SchedulerScenario, PriorityOrdersAdmissionTiesByArrival) {
  // One sequence at a time; the queue is B(5), C(1), D(1) when A finishes.
  const std::vector<NewRequest> later = {MakeReq(2, 20, 4, 2, 5), MakeReq(3, 30, 4, 2, 1),
                                         MakeReq(4, 40, 4, 2, 1)};
  HarnessConfig c = Cfg(64, 1, 64);
  c.sched.policy = Policy::kPriority;
  RunScenario(c, {
                     {.arrive = {MakeReq(1, 10, 4, 2, 5)}, .chunks = {{10, 0, 4}}, .running = {1}},
                     {.arrive = later, .chunks = {{10, 4, 1}}, .running = {1}},
                     {.chunks = {{30, 0, 4}}, .running = {3}},
                     {.chunks = {{30, 4, 1}}, .running = {3}},
                     {.chunks = {{40, 0, 4}}, .running = {4}},
                     {.chunks = {{40, 4, 1}}, .running = {4}},
                     {.chunks = {{20, 0, 4}}, .running = {2}},
                     {.chunks = {{20, 4, 1}}, .running = {2}},
                     {.chunks = {}, .running = {}},
                 });
  // The same arrivals under FCFS ignore the priorities.
  c.sched.policy = Policy::kFcfs;
  RunScenario(c, {
                     {.arrive = {MakeReq(1, 10, 4, 2, 5)}, .chunks = {{10, 0, 4}}, .running = {1}},
                     {.arrive = later, .chunks = {{10, 4, 1}}, .running = {1}},
                     {.chunks = {{20, 0, 4}}, .running = {2}},
                     {.chunks = {{20, 4, 1}}, .running = {2}},
                     {.chunks = {{30, 0, 4}}, .running = {3}},
                     {.chunks = {{30, 4, 1}}, .running = {3}},
                     {.chunks = {{40, 0, 4}}, .running = {4}},
                     {.chunks = {{40, 4, 1}}, .running = {4}},
                     {.chunks = {}, .running = {}},
                 });
}

TEST(SchedulerScenario, PriorityPreemptsTheWorstPriorityNotTheLatestArrival) {
  HarnessConfig c = Cfg(64, 4, 6);
  c.sched.policy = Policy::kPriority;
  // Y arrives first with priority 9; X arrives second with priority 0 and ranks first.
  RunScenario(c, {
                     {.arrive = {MakeReq(1, 10, 8, 8, 9), MakeReq(2, 20, 8, 8, 0)},
                      .chunks = {{20, 0, 8}, {10, 0, 8}},
                      .running = {1, 2}},
                     {.chunks = {{20, 8, 1}, {10, 8, 1}}, .running = {1, 2}},
                     {.chunks = {{20, 9, 1}, {10, 9, 1}}, .running = {1, 2}},
                     {.chunks = {{20, 10, 1}, {10, 10, 1}}, .running = {1, 2}},
                     {.chunks = {{20, 11, 1}, {10, 11, 1}}, .running = {1, 2}},
                     {.chunks = {{20, 12, 1}}, .running = {2}, .preempted = {1}},
                     {.chunks = {{20, 13, 1}}, .running = {2}},
                     {.chunks = {{20, 14, 1}}, .running = {2}},
                     {.chunks = {{10, 0, 13}}, .running = {1}},
                     {.chunks = {{10, 13, 1}}, .running = {1}},
                     {.chunks = {{10, 14, 1}}, .running = {1}},
                     {.chunks = {}, .running = {}},
                 });
}

TEST(SchedulerScenario, PrefillChunkPreemptsAnAlreadyScheduledDecode) {
  // A (20-token prompt, chunks of 4) ranks before B, which decodes in the same steps. At step 5
  // A's chunk needs a block: B is preempted, its decode chunk removed from the plan.
  HarnessConfig c = Cfg(8, 4, 6);
  c.sched.long_prefill_token_threshold = 4;
  RunScenario(c, {
                     {.arrive = {MakeReq(1, 10, 20, 2), MakeReq(2, 20, 4, 8)},
                      .chunks = {{10, 0, 4}, {20, 0, 4}},
                      .running = {1, 2}},
                     {.chunks = {{20, 4, 1}, {10, 4, 4}}, .running = {1, 2}},
                     {.chunks = {{20, 5, 1}, {10, 8, 4}}, .running = {1, 2}},
                     {.chunks = {{20, 6, 1}, {10, 12, 4}}, .running = {1, 2}},
                     {.chunks = {{10, 16, 4}}, .running = {1}, .preempted = {2}},
                     {.chunks = {{10, 20, 1}}, .running = {1}},
                     // The recompute is chunked by the threshold too.
                     {.chunks = {{20, 0, 4}}, .running = {2}},
                     {.chunks = {{20, 4, 4}}, .running = {2}},
                     {.chunks = {{20, 8, 1}}, .running = {2}},
                     {.chunks = {{20, 9, 1}}, .running = {2}},
                     {.chunks = {{20, 10, 1}}, .running = {2}},
                     {.chunks = {}, .running = {}},
                 });
}

TEST(SchedulerScenario, AbortsInEveryState) {
  // Budget 4, one sequence at a time: A prefills in two chunks while B and C wait.
  RunScenario(Cfg(4, 1, 64),
              {
                  {.arrive = {MakeReq(1, 10, 8, 4), MakeReq(2, 20, 4, 2), MakeReq(3, 30, 4, 2)},
                   .chunks = {{10, 0, 4}},
                   .running = {1}},
                  {.abort = {2}, .chunks = {{10, 4, 4}}, .running = {1}},  // waiting
                  // A (decoding) is aborted after the forward, before OnStepDone.
                  {.chunks = {{10, 8, 1}}, .running = {1}, .after = {.abort_mid = {1}}},
                  {.chunks = {{30, 0, 4}}, .running = {3}},
                  {.chunks = {{30, 4, 1}}, .running = {3}},
                  {.chunks = {}, .running = {}},
              });
  // Part-way through a chunked prefill; and a decoding request between steps.
  RunScenario(Cfg(4, 2, 64),
              {
                  {.arrive = {MakeReq(4, 40, 12, 2)}, .chunks = {{40, 0, 4}}, .running = {4}},
                  {.abort = {4}, .chunks = {}, .running = {}},
                  {.arrive = {MakeReq(5, 50, 2, 9)}, .chunks = {{50, 0, 2}}, .running = {5}},
                  {.chunks = {{50, 2, 1}}, .running = {5}},
                  {.abort = {5}, .chunks = {}, .running = {}},
              });
}

TEST(SchedulerScenario, AbortSwappedAndRecomputePreemptedRequests) {
  HarnessConfig c = Cfg(64, 4, 6);
  c.sched.preemption_mode = PreemptionMode::kSwap;
  c.swap_blocks = 8;
  Harness swap(c);
  RunRows(&swap,
          Concat(SharedPrefix(),
                 {
                     {.chunks = {{10, 12, 1}}, .running = {1}, .preempted = {2}, .swapped = {2}},
                     {.abort = {2}, .chunks = {{10, 13, 1}}, .running = {1}},
                 }));
  EXPECT_EQ(swap.kv().swap_blocks_used(), 0);
  Harness recompute(Cfg(64, 4, 6));
  RunRows(&recompute,
          Concat(SharedPrefix(), {
                                     {.chunks = {{10, 12, 1}}, .running = {1}, .preempted = {2}},
                                     {.abort = {2}, .chunks = {{10, 13, 1}}, .running = {1}},
                                     {.chunks = {{10, 14, 1}}, .running = {1}},
                                     {.chunks = {}, .running = {}},
                                 }));
  EXPECT_FALSE(recompute.sched().HasWork());
}

TEST(SchedulerScenario, StaticBatchingAdmitsOnlyWhenTheBatchIsDone) {
  const std::vector<NewRequest> arrivals = {MakeReq(1, 10, 4, 2), MakeReq(2, 20, 4, 4),
                                            MakeReq(3, 30, 4, 1)};
  HarnessConfig c = Cfg(64, 2, 64);
  c.sched.static_batching = true;
  RunScenario(c, {
                     {.arrive = arrivals, .chunks = {{10, 0, 4}, {20, 0, 4}}, .running = {1, 2}},
                     {.chunks = {{10, 4, 1}, {20, 4, 1}}, .running = {1, 2}},
                     {.chunks = {{20, 5, 1}}, .running = {2}},  // a free slot stays free
                     {.chunks = {{20, 6, 1}}, .running = {2}},
                     {.chunks = {{30, 0, 4}}, .running = {3}},
                     {.chunks = {}, .running = {}},
                 });
  // Continuous batching fills the slot at once.
  c.sched.static_batching = false;
  RunScenario(c, {
                     {.arrive = arrivals, .chunks = {{10, 0, 4}, {20, 0, 4}}, .running = {1, 2}},
                     {.chunks = {{10, 4, 1}, {20, 4, 1}}, .running = {1, 2}},
                     {.chunks = {{20, 5, 1}, {30, 0, 4}}, .running = {2, 3}},
                     {.chunks = {{20, 6, 1}}, .running = {2}},
                     {.chunks = {}, .running = {}},
                 });
  // A static batch is formed even when the token budget only covers its first prompt.
  HarnessConfig tight = Cfg(4, 2, 64);
  tight.sched.static_batching = true;
  RunScenario(tight, {
                         {.arrive = {MakeReq(1, 10, 4, 1), MakeReq(2, 20, 4, 1)},
                          .chunks = {{10, 0, 4}},
                          .running = {1, 2}},
                         {.chunks = {{20, 0, 4}}, .running = {2}},
                         {.chunks = {}, .running = {}},
                     });
}

TEST(SchedulerScenario, AgingPromotesAStarvedLowPriorityRequest) {
  // One sequence at a time and a high-priority request always waiting: without aging the
  // priority-9 request L only runs when the stream stops.
  auto rows = [](bool aging) {
    std::vector<Row> r = {
        {.arrive = {MakeReq(1, 10, 4, 2, 0), MakeReq(9, 90, 4, 1, 9)},
         .chunks = {{10, 0, 4}},
         .running = {1}},
        {.arrive = {MakeReq(2, 20, 4, 2, 0)}, .chunks = {{10, 4, 1}}, .running = {1}},
        {.chunks = {{20, 0, 4}}, .running = {2}},
        {.arrive = {MakeReq(3, 30, 4, 2, 0)}, .chunks = {{20, 4, 1}}, .running = {2}},
    };
    if (aging) {  // L is promoted at step 5, 5 steps after it arrived
      r.push_back({.chunks = {{90, 0, 4}}, .running = {9}});
      r.push_back({.arrive = {MakeReq(4, 40, 4, 2, 0)}, .chunks = {{30, 0, 4}}, .running = {3}});
      r.push_back({.chunks = {{30, 4, 1}}, .running = {3}});
      r.push_back({.chunks = {{40, 0, 4}}, .running = {4}});
      r.push_back({.chunks = {{40, 4, 1}}, .running = {4}});
    } else {
      r.push_back({.chunks = {{30, 0, 4}}, .running = {3}});
      r.push_back({.arrive = {MakeReq(4, 40, 4, 2, 0)}, .chunks = {{30, 4, 1}}, .running = {3}});
      r.push_back({.chunks = {{40, 0, 4}}, .running = {4}});
      r.push_back({.chunks = {{40, 4, 1}}, .running = {4}});
      r.push_back({.chunks = {{90, 0, 4}}, .running = {9}});
    }
    r.push_back({.chunks = {}, .running = {}});
    return r;
  };
  HarnessConfig c = Cfg(64, 1, 64);
  c.sched.policy = Policy::kPriority;
  c.sched.max_wait_steps = 5;
  RunScenario(c, rows(true));
  c.sched.max_wait_steps = 0;
  RunScenario(c, rows(false));
}

TEST(SchedulerScenario, ParallelSamplingPrefillsOnceThenForks) {
  // A wants 3 sequences and B 2: with max_num_seqs 4, B waits for A. The fake model forks the
  // children (first seq + 1, + 2) right after the prompt's sample, sharing its blocks.
  Harness h(Cfg(64, 4, 64));
  RunRows(&h, {
                  {.arrive = {MakeReq(1, 10, 6, 3, 0, 3), MakeReq(2, 20, 4, 1, 0, 2)},
                   .chunks = {{10, 0, 6}},
                   .running = {1}},
              });
  // Children share both prompt blocks.
  EXPECT_EQ(h.kv().manager().num_used_blocks(), 2);
  RunRows(&h, {
                  {.chunks = {{10, 6, 1}, {11, 6, 1}, {12, 6, 1}}, .running = {1}},
              });
  // The shared full block stays shared; each sequence has its own copy of the partial one.
  EXPECT_EQ(h.kv().manager().num_used_blocks(), 4);
  RunRows(&h, {
                  {.chunks = {{10, 7, 1}, {11, 7, 1}, {12, 7, 1}}, .running = {1}},
                  {.chunks = {{20, 0, 4}}, .running = {2}},
                  {.chunks = {}, .running = {}},
              });
  EXPECT_EQ(h.num_finished(), 2);
}

TEST(SchedulerScenario, AdmissionReservesABlockPerFutureFork) {
  // 8 blocks. A (n = 2, 8-token prompt) needs 2 blocks + 1 reserved for its fork; B's 21-token
  // prompt needs 6 of the remaining 5, so it waits until A is done.
  RunScenario(Cfg(64, 4, 8), {
                                 {.arrive = {MakeReq(1, 10, 8, 4, 0, 2), MakeReq(2, 20, 21, 4)},
                                  .chunks = {{10, 0, 8}},
                                  .running = {1}},
                                 {.chunks = {{10, 8, 1}, {11, 8, 1}}, .running = {1}},
                                 {.chunks = {{10, 9, 1}, {11, 9, 1}}, .running = {1}},
                                 {.chunks = {{10, 10, 1}, {11, 10, 1}}, .running = {1}},
                                 {.chunks = {{20, 0, 21}}, .running = {2}},
                                 {.chunks = {{20, 21, 1}}, .running = {2}},
                                 {.chunks = {{20, 22, 1}}, .running = {2}},
                                 {.chunks = {{20, 23, 1}}, .running = {2}},
                                 {.chunks = {}, .running = {}},
                             });
}

TEST(SchedulerScenario, ForkedRequestIsRecomputedSequenceBySequence) {
  // 6 blocks. X ranks first; A (n = 2) shares its prompt block between its two sequences. At
  // step 6 A's sequence 20 needs a block and A is itself the worst request: it preempts itself,
  // and later each of its sequences re-prefills its own 9 tokens.
  Harness h(Cfg(64, 4, 6));
  RunRows(&h, {
                  {.arrive = {MakeReq(1, 10, 4, 8), MakeReq(2, 20, 4, 6, 0, 2)},
                   .chunks = {{10, 0, 4}, {20, 0, 4}},
                   .running = {1, 2}},
                  {.chunks = {{10, 4, 1}, {20, 4, 1}, {21, 4, 1}}, .running = {1, 2}},
                  {.chunks = {{10, 5, 1}, {20, 5, 1}, {21, 5, 1}}, .running = {1, 2}},
                  {.chunks = {{10, 6, 1}, {20, 6, 1}, {21, 6, 1}}, .running = {1, 2}},
                  {.chunks = {{10, 7, 1}, {20, 7, 1}, {21, 7, 1}}, .running = {1, 2}},
                  {.chunks = {{10, 8, 1}}, .running = {1}, .preempted = {2}},
                  // A needs 3 + 3 blocks, only 3 are free while X runs.
                  {.chunks = {{10, 9, 1}}, .running = {1}},
                  {.chunks = {{10, 10, 1}}, .running = {1}},
                  {.chunks = {{20, 0, 9}, {21, 0, 9}}, .running = {2}},
                  {.chunks = {}, .running = {}},
              });
  EXPECT_EQ(h.sched().Stats().num_preemptions, 1);
  EXPECT_EQ(h.sched().Stats().num_recomputed_tokens, 16);
  EXPECT_EQ(h.num_finished(), 2);
}

}  // namespace
}  // namespace kvforge::sched::testing
