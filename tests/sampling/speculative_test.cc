#include "sampling/speculative.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvforge::sampling {
namespace {

constexpr int64_t kVocab = 6;

SamplingParams Params(uint64_t seed) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 5;  // token 5 is never a candidate of p
  p.top_p = 1.0f;
  p.min_p = 0;
  p.seed = seed;
  return p;
}

TokenDistribution DistOf(Sampler& s, std::vector<float> logits) {
  return s.Distribution(logits.data(), kVocab, {});
}

// Pearson's chi-square of `counts` against `p`'s probabilities (cells with p = 0 must be empty,
// else the statistic is huge).
double ChiSquare(const std::vector<int>& counts, const TokenDistribution& p, int n) {
  double chi = 0;
  for (int32_t t = 0; t < kVocab; ++t) {
    const double expected = p.Prob(t) * n;
    const double c = counts[static_cast<size_t>(t)];
    if (expected == 0) {
      if (c > 0) return 1e9;
      continue;
    }
    chi += (c - expected) * (c - expected) / expected;
  }
  return chi;
}

// df = 4 (five candidates): P(chi2 > 23.5) = 1e-4. Seeds are fixed, so the test is deterministic.
constexpr double kCritical = 23.5;
constexpr int kDraws = 40000;

TEST(SpeculativeTest, DraftModelOutputIsDistributedAsTheTarget) {
  Sampler target(Params(11)), draft(Params(12));
  const TokenDistribution p = DistOf(target, {2.0f, 0.5f, 1.5f, -1.0f, 0.0f, -3.0f});
  // A draft that disagrees a lot (and proposes token 5, which p never allows).
  SamplingParams qp = Params(13);
  qp.top_k = 0;
  Sampler qs(qp);
  const TokenDistribution q = DistOf(qs, {-1.0f, 2.0f, 0.0f, 1.0f, 0.2f, 1.0f});
  std::vector<int> counts(kVocab, 0), proposals(kVocab, 0);
  int accepted = 0;
  for (int i = 0; i < kDraws; ++i) {
    const int32_t x = draft.Draw(q);
    proposals[static_cast<size_t>(x)]++;
    const DraftVerdict v = VerifyDraft(target, p, x, &q);
    ASSERT_GE(v.token, 0);
    counts[static_cast<size_t>(v.token)]++;
    accepted += v.accepted;
  }
  EXPECT_LT(ChiSquare(counts, p, kDraws), kCritical);
  // The control: the proposals themselves are far from p, so the test can fail.
  EXPECT_GT(ChiSquare(proposals, p, kDraws), 1000);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, kDraws);
}

TEST(SpeculativeTest, PointMassDraftOutputIsDistributedAsTheTarget) {
  Sampler target(Params(21));
  const TokenDistribution p = DistOf(target, {0.3f, 1.1f, 0.9f, 0.0f, 1.0f, 0.2f});
  for (int32_t x : {1, 3, 5}) {  // likely, unlikely, and outside p's candidates
    std::vector<int> counts(kVocab, 0);
    int accepted = 0;
    for (int i = 0; i < kDraws; ++i) {
      const DraftVerdict v = VerifyDraft(target, p, x, nullptr);
      counts[static_cast<size_t>(v.token)]++;
      accepted += v.accepted;
    }
    EXPECT_LT(ChiSquare(counts, p, kDraws), kCritical) << "draft " << x;
    // Kept at rate p(x).
    EXPECT_NEAR(static_cast<double>(accepted) / kDraws, p.Prob(x), 0.01) << "draft " << x;
  }
}

TEST(SpeculativeTest, GreedyKeepsOnlyTheArgmaxAndDrawsNothing) {
  SamplingParams gp;
  gp.temperature = 0;
  Sampler s(gp);
  const auto rng = s.rng();
  const TokenDistribution p = DistOf(s, {0.1f, 0.2f, 3.0f, 0.0f, 1.0f, 0.5f});
  EXPECT_TRUE(VerifyDraft(s, p, 2, nullptr).accepted);
  const DraftVerdict v = VerifyDraft(s, p, 4, nullptr);
  EXPECT_FALSE(v.accepted);
  EXPECT_EQ(v.token, 2);
  EXPECT_TRUE(s.rng() == rng);
}

TEST(SpeculativeTest, SampleIsDrawOfDistribution) {
  Sampler a(Params(5)), b(Params(5));
  for (int i = 0; i < 200; ++i) {
    std::vector<float> la{0.1f, 0.7f, 0.3f, 0.9f, 0.5f, 0.2f}, lb = la;
    EXPECT_EQ(a.Sample(la.data(), kVocab, {1, 3}),
              b.Draw(b.Distribution(lb.data(), kVocab, {1, 3})));
  }
}

}  // namespace
}  // namespace kvforge::sampling
