// StepCostModel: the fit recovers exact linear costs, never goes negative and is the best
// non-negative fit (checked against random candidates), follows a machine that slows down,
// ignores bad observations, and MaxChunkTokens agrees with a linear scan.
#include "sched/step_cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "support/test_rng.h"

namespace kvforge::sched {
namespace {

using ::kvforge::testing::Rng;

StepShape RandomShape(Rng& rng) {
  StepShape s;
  s.decode_tokens = rng.Range(0, 32);
  const int64_t prefill = rng.Chance(50) ? rng.Range(1, 512) : 0;
  s.prefill_tokens = prefill;
  if (s.decode_tokens + s.prefill_tokens == 0) s.decode_tokens = 1;
  s.attention_pairs =
      ChunkAttentionPairs(rng.Range(0, 2048), prefill) + s.decode_tokens * rng.Range(1, 2048);
  return s;
}

double Linear(const StepCostModel::Coefficients& c, const StepShape& s) {
  return c.fixed_ms + c.decode_ms * static_cast<double>(s.decode_tokens) +
         c.prefill_ms * static_cast<double>(s.prefill_tokens) +
         c.pair_ms * static_cast<double>(s.attention_pairs);
}

TEST(StepCostModel, ChunkAttentionPairsCountsCausalKeys) {
  EXPECT_EQ(ChunkAttentionPairs(0, 1), 1);
  EXPECT_EQ(ChunkAttentionPairs(2, 3), 3 + 4 + 5);  // positions 2, 3, 4 see 3, 4, 5 keys
  EXPECT_EQ(ChunkAttentionPairs(100, 1), 101);      // a decode token at position 100
  EXPECT_EQ(ChunkAttentionPairs(7, 0), 0);
}

TEST(StepCostModel, RecoversExactLinearCosts) {
  Rng rng(7);
  const StepCostModel::Coefficients truth{2.5, 0.8, 0.15, 2e-5};
  StepCostModel m(1.0);
  EXPECT_EQ(m.PredictMs({1, 0, 1}), 0);
  for (int i = 0; i < 200; ++i) {
    const StepShape s = RandomShape(rng);
    m.Observe(s, Linear(truth, s));
  }
  const auto& c = m.coefficients();
  EXPECT_NEAR(c.fixed_ms, truth.fixed_ms, 1e-4);
  EXPECT_NEAR(c.decode_ms, truth.decode_ms, 1e-5);
  EXPECT_NEAR(c.prefill_ms, truth.prefill_ms, 1e-6);
  EXPECT_NEAR(c.pair_ms, truth.pair_ms, 1e-9);
  for (int i = 0; i < 50; ++i) {
    const StepShape s = RandomShape(rng);
    EXPECT_NEAR(m.PredictMs(s), Linear(truth, s), 1e-3 * (1 + Linear(truth, s)));
  }
}

// Data a free least-squares fit would explain with a negative prefill cost: the best
// non-negative fit beats (or ties) every random non-negative candidate.
TEST(StepCostModel, BestNonNegativeFit) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    StepCostModel m(1.0);
    std::vector<std::pair<StepShape, double>> data;
    for (int i = 0; i < 60; ++i) {
      const StepShape s = RandomShape(rng);
      const double noise = static_cast<double>(rng.Range(-1000, 1000)) / 1000.0;
      const double ms = std::max(0.0, 10.0 + 0.5 * static_cast<double>(s.decode_tokens) -
                                          0.01 * static_cast<double>(s.prefill_tokens) + noise);
      m.Observe(s, ms);
      data.emplace_back(s, ms);
    }
    const auto& c = m.coefficients();
    EXPECT_GE(c.fixed_ms, 0);
    EXPECT_GE(c.decode_ms, 0);
    EXPECT_GE(c.prefill_ms, 0);
    EXPECT_GE(c.pair_ms, 0);
    auto sse = [&](const StepCostModel::Coefficients& k) {
      double e = 0;
      for (const auto& [s, ms] : data) e += (Linear(k, s) - ms) * (Linear(k, s) - ms);
      return e;
    };
    const double best = sse(c);
    for (int t = 0; t < 500; ++t) {
      const StepCostModel::Coefficients k{
          c.fixed_ms * (0.5 + rng.Range(0, 1000) / 1000.0) + rng.Range(0, 100) / 100.0,
          c.decode_ms * (0.5 + rng.Range(0, 1000) / 1000.0), rng.Range(0, 100) / 1e4,
          rng.Range(0, 100) / 1e7};
      EXPECT_LE(best, sse(k) * (1 + 1e-9) + 1e-9) << "seed " << seed;
    }
  }
}

TEST(StepCostModel, ForgettingFollowsASlowerMachine) {
  Rng rng(3);
  const StepCostModel::Coefficients fast{2, 0.5, 0.1, 1e-5};
  const StepCostModel::Coefficients slow{4, 1.0, 0.2, 2e-5};
  StepCostModel m(0.95);
  for (int i = 0; i < 200; ++i) {
    const StepShape s = RandomShape(rng);
    m.Observe(s, Linear(fast, s));
  }
  for (int i = 0; i < 300; ++i) {
    const StepShape s = RandomShape(rng);
    m.Observe(s, Linear(slow, s));
  }
  EXPECT_NEAR(m.coefficients().prefill_ms, slow.prefill_ms, 1e-3);
  EXPECT_NEAR(m.coefficients().decode_ms, slow.decode_ms, 1e-2);
}

// Steps of one shape vary by up to 40% here: about 5% of them land above predicted x
// tail_factor(), and the factor is above 1.
TEST(StepCostModel, TailFactorTracksThe95thPercentile) {
  Rng rng(11);
  const StepCostModel::Coefficients truth{3, 0.6, 0.2, 1e-5};
  StepCostModel m;
  EXPECT_EQ(m.tail_factor(), 1.0);
  auto noisy_step = [&](int64_t* above) {
    StepShape s = RandomShape(rng);
    if (s.decode_tokens == 0) s.decode_tokens = 1;
    const double ms = Linear(truth, s) * (1.0 + static_cast<double>(rng.Range(0, 400)) / 1000.0);
    if (above != nullptr && ms > m.PredictMs(s) * m.tail_factor()) ++*above;
    m.Observe(s, ms);
  };
  for (int i = 0; i < 3000; ++i) noisy_step(nullptr);
  int64_t above = 0;
  const int kTrials = 4000;
  for (int i = 0; i < kTrials; ++i) noisy_step(&above);
  const double share = static_cast<double>(above) / kTrials;
  EXPECT_GT(share, 0.02);
  EXPECT_LT(share, 0.09);
  EXPECT_GT(m.tail_factor(), 1.05);
  EXPECT_LT(m.tail_factor(), 1.4);
}

TEST(StepCostModel, ReadyNeedsPrefillAndDecodeSteps) {
  StepCostModel m;
  for (int i = 0; i < 10; ++i) m.Observe({4, 0, 40}, 5);
  EXPECT_FALSE(m.ready());  // decode steps only
  for (int i = 0; i < StepCostModel::kMinSteps - 1; ++i) m.Observe({0, 64, 2080}, 9);
  EXPECT_FALSE(m.ready());
  m.Observe({2, 32, 600}, 7);
  EXPECT_TRUE(m.ready());
}

TEST(StepCostModel, IgnoresBadObservations) {
  StepCostModel m;
  m.Observe({1, 0, 1}, std::numeric_limits<double>::quiet_NaN());
  m.Observe({1, 0, 1}, -1);
  m.Observe({1, 0, 1}, std::numeric_limits<double>::infinity());
  m.Observe({0, 0, 0}, 3);
  m.Observe({-1, 5, 5}, 3);
  EXPECT_EQ(m.num_observed(), 0);
  m.Observe({1, 0, 1}, 3);
  EXPECT_EQ(m.num_observed(), 1);
  EXPECT_TRUE(std::isfinite(m.PredictMs({1, 0, 1})));
}

TEST(StepCostModel, MaxChunkTokensMatchesALinearScan) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Rng rng(seed);
    StepCostModel m(1.0);
    const StepCostModel::Coefficients truth{1.0 + rng.Range(0, 10), rng.Range(1, 100) / 100.0,
                                            rng.Range(1, 100) / 400.0, rng.Range(0, 100) / 1e5};
    for (int i = 0; i < 40; ++i) {
      const StepShape s = RandomShape(rng);
      m.Observe(s, Linear(truth, s));
    }
    for (int t = 0; t < 20; ++t) {
      const double budget = rng.Range(0, 20000) / 100.0;
      const int64_t pos0 = rng.Range(0, 4096), max_tokens = rng.Range(0, 700);
      int64_t scan = 0;
      while (scan < max_tokens && m.ChunkMs(pos0, scan + 1) <= budget) ++scan;
      EXPECT_EQ(m.MaxChunkTokens(budget, pos0, max_tokens), scan)
          << "seed " << seed << " budget " << budget << " pos0 " << pos0;
    }
    EXPECT_EQ(m.MaxChunkTokens(-1, 0, 100), 0);
    EXPECT_EQ(m.MaxChunkTokens(1e9, 0, 100), 100);
  }
}

}  // namespace
}  // namespace kvforge::sched
