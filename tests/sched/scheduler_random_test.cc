// Seeded randomized test for sched::Scheduler: per seed a random configuration (tiny caches,
// tiny budgets, every policy / preemption mode / static batching / chunking combination) and a
// few thousand steps of random arrivals (n > 1 included), aborts before and during steps, EOS
// finishes, dropped sequences and discarded plans. The harness checks every universal property
// after every Schedule() and OnStepDone() against its model of the request lifecycle (budget,
// sequence cap, invariants, KV blocks balance, no request lost or duplicated, token counts).
// AddRequest's verdict is checked against an independent computation of "could never fit".
// Finally arrivals stop and every request must finish within a bounded number of steps (no
// deadlock, livelock or starvation).
//
// Seeds are fixed (deterministic CI). KVF_SCHED_SEED=<n> runs only that seed and
// KVF_SCHED_STEPS=<n> changes the step count. A failure prints the seed and the configuration.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sched/sched_harness.h"
#include "support/test_rng.h"

namespace kvforge::sched::testing {
namespace {

using ::kvforge::testing::Rng;

HarnessConfig RandomConfig(Rng& rng) {
  HarnessConfig c;
  const int32_t block_sizes[] = {1, 2, 4, 8, 16};
  c.block_tokens = block_sizes[rng.Range(0, 4)];
  c.num_blocks = static_cast<int32_t>(rng.Range(2, 40));
  c.swap_blocks = rng.Range(0, 30);
  SchedulerConfig& s = c.sched;
  s.max_num_batched_tokens = rng.Range(1, 48);
  s.max_num_seqs = rng.Range(1, 8);
  s.chunked_prefill = rng.Chance(80);
  s.long_prefill_token_threshold = rng.Chance(30) ? rng.Range(1, 16) : 0;
  s.policy = rng.Chance(50) ? Policy::kPriority : Policy::kFcfs;
  s.preemption_mode = rng.Chance(50) ? PreemptionMode::kSwap : PreemptionMode::kRecompute;
  s.static_batching = rng.Chance(15);
  s.max_wait_steps = rng.Chance(20) ? 0 : rng.Range(1, 60);
  s.kv_watermark = rng.Chance(50) ? 0.0 : 0.1;
  if (rng.Chance(40)) {
    c.synthetic_step_cost = true;
    s.max_itl_ms = static_cast<double>(rng.Range(2, 12));
    s.min_prefill_chunk = rng.Range(1, 8);
    s.max_ttft_ms = rng.Chance(50) ? static_cast<double>(rng.Range(5, 80)) : 0.0;
  }
  return c;
}

std::string Describe(const HarnessConfig& c) {
  const SchedulerConfig& s = c.sched;
  return "blocks " + std::to_string(c.num_blocks) + "x" + std::to_string(c.block_tokens) +
         " swap " + std::to_string(c.swap_blocks) + " budget " +
         std::to_string(s.max_num_batched_tokens) + " seqs " + std::to_string(s.max_num_seqs) +
         (s.chunked_prefill ? " chunked" : " whole") + " threshold " +
         std::to_string(s.long_prefill_token_threshold) +
         (s.policy == Policy::kPriority ? " priority" : " fcfs") +
         (s.preemption_mode == PreemptionMode::kSwap ? " swap" : " recompute") +
         (s.static_batching ? " static" : "") + " max_wait " + std::to_string(s.max_wait_steps) +
         " watermark " + std::to_string(s.kv_watermark) + " max_itl_ms " +
         std::to_string(s.max_itl_ms) + " min_prefill_chunk " + std::to_string(s.min_prefill_chunk) +
         " max_ttft_ms " + std::to_string(s.max_ttft_ms);
}

int64_t EnvOr(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::strtoll(v, nullptr, 10);
}

// What AddRequest must answer, computed independently.
StatusCode ExpectedAdd(const HarnessConfig& c, const NewRequest& r) {
  if (r.num_seqs > c.sched.max_num_seqs) return StatusCode::kInvalidArgument;
  if (!c.sched.chunked_prefill && r.prompt_tokens > c.sched.max_num_batched_tokens) {
    return StatusCode::kInvalidArgument;
  }
  const int64_t per_seq =
      (r.prompt_tokens + r.max_new_tokens + c.block_tokens - 1) / c.block_tokens;
  if (per_seq * r.num_seqs > c.num_blocks) return StatusCode::kResourceExhausted;
  return StatusCode::kOk;
}

// What the runs exercised, summed over seeds (so a change that stops a path being reached is
// noticed).
struct Coverage {
  int64_t steps = 0;
  int64_t requests = 0;
  int64_t rejected = 0;
  int64_t preemptions = 0;
  int64_t swap_preemptions = 0;
  int64_t swap_ins = 0;
  int64_t recomputed_tokens = 0;
  int64_t forked_requests = 0;
  int64_t itl_limited_steps = 0;
};

RequestId PickLive(Rng& rng, const Harness& h) {
  auto it = h.live().begin();
  std::advance(it, rng.Range(0, static_cast<int64_t>(h.live().size()) - 1));
  return it->first;
}

void RunSeed(uint64_t seed, int64_t steps, Coverage* cov) {
  Rng rng(seed);
  const HarnessConfig config = RandomConfig(rng);
  SCOPED_TRACE("seed " + std::to_string(seed) + ": " + Describe(config));
  Harness h(config);
  RequestId next_id = 1;
  int64_t added = 0;
  int64_t rejected = 0;
  for (int64_t step = 0; step < steps; ++step) {
    if (h.live().size() < 12 && rng.Chance(35)) {
      for (int64_t k = rng.Range(1, 2); k > 0; --k) {
        const RequestId id = next_id++;
        const int32_t n = rng.Chance(25) ? static_cast<int32_t>(rng.Range(2, 3)) : 1;
        // Sized against the cache so that a few requests fill it (and some could never fit).
        const int64_t slots = int64_t{config.num_blocks} * config.block_tokens;
        const int64_t longest = std::clamp<int64_t>(slots / 2, 2, 64);
        const NewRequest r = MakeReq(id, id * 100, rng.Range(1, longest), rng.Range(1, longest),
                                     static_cast<int32_t>(rng.Range(0, 3)), n);
        const Status s = h.Add(r);
        ASSERT_EQ(s.code(), ExpectedAdd(config, r)) << s.ToString();
        (s.ok() ? added : rejected) += 1;
        if (s.ok() && n > 1) ++cov->forked_requests;
      }
    }
    if (!h.live().empty() && rng.Chance(4)) (void)h.Abort(PickLive(rng, h));
    if (!h.live().empty() && rng.Chance(5)) {
      // Drop a non-first sequence of a forked request (a pruned beam), between steps.
      const RequestId id = PickLive(rng, h);
      const auto& seqs = h.live().at(id).tokens;
      if (seqs.size() > 1) {
        ASSERT_TRUE(h.Drop(id, seqs.rbegin()->first).ok());
      }
    }
    const StepPlan plan = h.Schedule();
    if (::testing::Test::HasFailure()) return;
    if (rng.Chance(3)) continue;  // the forward failed: the plan is discarded
    StepActions actions;
    for (const ScheduledChunk& c : plan.chunks) {
      if (c.sample && rng.Chance(2)) actions.finish.push_back(c.request);  // EOS
    }
    if (!h.live().empty() && rng.Chance(3)) actions.abort_mid.push_back(PickLive(rng, h));
    h.Complete(plan, actions);
    if (::testing::Test::HasFailure()) return;
  }
  // Drain: no more arrivals; every request must finish.
  int64_t drain = 0;
  while (!h.live().empty() && drain < 20000) {
    h.Step();
    ++drain;
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_TRUE(h.live().empty()) << h.live().size() << " requests never finished";
  EXPECT_FALSE(h.sched().HasWork());
  EXPECT_EQ(h.kv().num_free_blocks(), config.num_blocks);
  EXPECT_EQ(h.kv().swap_blocks_used(), 0);
  EXPECT_GT(added, 0);
  const SchedulerStats st = h.sched().Stats();
  cov->steps += st.num_steps;
  cov->requests += added;
  cov->rejected += rejected;
  cov->preemptions += st.num_preemptions;
  cov->swap_preemptions += st.num_swap_preemptions;
  cov->swap_ins += st.num_swap_ins;
  cov->recomputed_tokens += st.num_recomputed_tokens;
  cov->itl_limited_steps += st.num_itl_limited_steps;
}

TEST(SchedulerRandomTest, ThousandsOfStepsKeepEveryInvariant) {
  const int64_t steps = EnvOr("KVF_SCHED_STEPS", 800);
  Coverage cov;
  if (const int64_t only = EnvOr("KVF_SCHED_SEED", -1); only >= 0) {
    RunSeed(static_cast<uint64_t>(only), steps, &cov);
    return;
  }
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    RunSeed(seed, steps, &cov);
    if (::testing::Test::HasFailure()) return;
  }
  std::printf(
      "[ coverage ] %lld steps, %lld requests (%lld rejected, %lld with n > 1), "
      "%lld preemptions (%lld by swap, %lld swap-ins), %lld tokens recomputed, %lld steps cut "
      "by max_itl_ms\n",
      static_cast<long long>(cov.steps), static_cast<long long>(cov.requests),
      static_cast<long long>(cov.rejected), static_cast<long long>(cov.forked_requests),
      static_cast<long long>(cov.preemptions), static_cast<long long>(cov.swap_preemptions),
      static_cast<long long>(cov.swap_ins), static_cast<long long>(cov.recomputed_tokens),
      static_cast<long long>(cov.itl_limited_steps));
  EXPECT_GT(cov.preemptions, 0);
  EXPECT_GT(cov.swap_preemptions, 0);
  EXPECT_GT(cov.swap_ins, 0);
  EXPECT_GT(cov.rejected, 0);
  EXPECT_GT(cov.forked_requests, 0);
  EXPECT_GT(cov.itl_limited_steps, 0);
}

}  // namespace
}  // namespace kvforge::sched::testing
