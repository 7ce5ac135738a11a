#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <map>

namespace kvforge::sampling {
namespace {

std::vector<float> Logits() { return {1.0f, 3.0f, 2.0f, 0.5f, 2.9f}; }

TEST(SamplerTest, GreedyIsArgmax) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  auto l = Logits();
  EXPECT_EQ(s.Sample(l.data(), 5, {}), 1);
}

TEST(SamplerTest, TopKOneIsGreedyAndSeedsAreReproducible) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 1;
  Sampler s(p);
  for (int i = 0; i < 20; ++i) {
    auto l = Logits();
    EXPECT_EQ(s.Sample(l.data(), 5, {}), 1);
  }
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.seed = 7;
  Sampler a(p), b(p);
  for (int i = 0; i < 50; ++i) {
    auto l1 = Logits(), l2 = Logits();
    EXPECT_EQ(a.Sample(l1.data(), 5, {}), b.Sample(l2.data(), 5, {}));
  }
}

TEST(SamplerTest, DistributionFollowsSoftmax) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.seed = 1;
  Sampler s(p);
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = {0.0f, std::log(3.0f)};  // probabilities 1/4, 3/4
    counts[s.Sample(l.data(), 2, {})]++;
  }
  EXPECT_NEAR(counts[1] / static_cast<double>(n), 0.75, 0.02);
}

TEST(SamplerTest, TopPAndMinPCut) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.seed = 3;
  p.top_p = 0.5f;  // token 0 alone has 0.88 probability
  p.min_p = 0;
  Sampler s(p);
  for (int i = 0; i < 100; ++i) {
    std::vector<float> l = {4.0f, 2.0f, 0.0f};
    EXPECT_EQ(s.Sample(l.data(), 3, {}), 0);
  }
  p.top_p = 1.0f;
  p.min_p = 0.2f;  // token 2's probability is 0.016 / 0.87 of the top: cut
  Sampler m(p);
  for (int i = 0; i < 300; ++i) {
    std::vector<float> l = {4.0f, 2.0f, 0.0f};
    EXPECT_NE(m.Sample(l.data(), 3, {}), 2);
  }
}

TEST(SamplerTest, PenaltiesPushRepeatedTokensDown) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> l = {1.0f, 3.0f, 2.0f};
  EXPECT_EQ(s.Sample(l.data(), 3, {1}), 2);  // 3/2 = 1.5 < 2
  EXPECT_FLOAT_EQ(l[1], 1.5f);
  p.repetition_penalty = 1.0f;
  p.frequency_penalty = 1.0f;
  p.presence_penalty = 0.5f;
  Sampler f(p);
  std::vector<float> l2 = {1.0f, 3.0f, 2.0f};
  EXPECT_EQ(f.Sample(l2.data(), 3, {1, 1}), 2);  // 3 - 2*1 - 0.5 = 0.5
  EXPECT_FLOAT_EQ(l2[1], 0.5f);
}

TEST(SamplerTest, LogProbAndTopN) {
  std::vector<float> l = {0.0f, std::log(3.0f)};
  std::vector<TokenLogprob> top;
  const float lp = Sampler::LogProb(l.data(), 2, 0, &top, 2);
  EXPECT_NEAR(lp, std::log(0.25), 1e-6);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].id, 1);
  EXPECT_NEAR(top[0].logprob, std::log(0.75), 1e-6);
}

TEST(SamplerTest, ValidateRejectsNonsense) {
  SamplingParams p;
  EXPECT_TRUE(p.Validate().ok());
  p.temperature = std::nanf("");
  EXPECT_FALSE(p.Validate().ok());
  p = SamplingParams();
  p.top_p = 1.5f;
  EXPECT_FALSE(p.Validate().ok());
  p = SamplingParams();
  p.stop = {""};
  EXPECT_FALSE(p.Validate().ok());
  p = SamplingParams();
  p.logprobs = 100;
  EXPECT_FALSE(p.Validate().ok());
}

}  // namespace
}  // namespace kvforge::sampling
