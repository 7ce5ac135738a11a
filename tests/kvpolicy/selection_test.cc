// Unit tests for kvpolicy/selection.h: SelectKept and AvgPool1d against brute-force references,
// PyramidBudgets' shape and mean, BudgetTokens, the per-kind predicates and SlotScores.
#include "kvpolicy/selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "support/test_rng.h"

namespace kvforge::kvpolicy {
namespace {

using ::kvforge::testing::Rng;

constexpr KvPolicyKind kAllKinds[] = {
    KvPolicyKind::kNone,  KvPolicyKind::kStreaming, KvPolicyKind::kH2O,       KvPolicyKind::kTova,
    KvPolicyKind::kKnorm, KvPolicyKind::kSnapKV,    KvPolicyKind::kPyramidKV, KvPolicyKind::kRandom,
    KvPolicyKind::kQuest, KvPolicyKind::kNsa,
};

KvPolicy Policy(KvPolicyKind kind, double budget) {
  KvPolicy p;
  p.kind = kind;
  p.budget = budget;
  return p;
}

// ---------------------------------------------------------------------------------------------
// SelectKept

// The brute-force reference: sort the middle candidates by (score desc, index desc), take the
// first budget - front - back, add the first `front` and last `back`, output ascending.
std::vector<int32_t> ReferenceSelectKept(const std::vector<int32_t>& live,
                                         const std::vector<float>& score, int64_t budget,
                                         int64_t front, int64_t back) {
  const auto n = static_cast<int64_t>(live.size());
  if (n <= budget) return live;
  budget = std::max<int64_t>(budget, 0);
  front = std::clamp<int64_t>(front, 0, budget);
  back = std::clamp<int64_t>(back, 0, budget - front);
  std::vector<bool> keep(live.size(), false);
  for (int64_t i = 0; i < front; ++i) keep[static_cast<size_t>(i)] = true;
  for (int64_t i = n - back; i < n; ++i) keep[static_cast<size_t>(i)] = true;
  std::vector<int64_t> mid;
  for (int64_t i = front; i < n - back; ++i) mid.push_back(i);
  std::sort(mid.begin(), mid.end(), [&](int64_t a, int64_t b) {
    const float sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
    if (sa != sb) return sa > sb;
    return a > b;
  });
  const int64_t want = budget - front - back;
  for (int64_t i = 0; i < want && i < static_cast<int64_t>(mid.size()); ++i)
    keep[static_cast<size_t>(mid[static_cast<size_t>(i)])] = true;
  std::vector<int32_t> out;
  for (size_t i = 0; i < live.size(); ++i)
    if (keep[i]) out.push_back(live[i]);
  return out;
}

std::string Describe(const std::vector<int32_t>& live, const std::vector<float>& score,
                     int64_t budget, int64_t front, int64_t back) {
  std::string s = "budget=" + std::to_string(budget) + " front=" + std::to_string(front) +
                  " back=" + std::to_string(back) + " live(slot:score)=";
  for (size_t i = 0; i < live.size(); ++i)
    s += std::to_string(live[i]) + ":" + std::to_string(static_cast<int>(score[i])) + " ";
  return s;
}

TEST(SelectKeptTest, MatchesBruteForceOnRandomCases) {
  Rng rng(20240601);
  int selected_cases = 0;  // cases where live.size() > budget (the interesting ones)
  for (int c = 0; c < 2000; ++c) {
    // A sorted random subset of [0, 300) with a random density.
    const int density = static_cast<int>(rng.Range(1, 100));
    std::vector<int32_t> live;
    for (int32_t s = 0; s < 300; ++s)
      if (rng.Chance(density)) live.push_back(s);
    const auto n = static_cast<int64_t>(live.size());
    // Scores from a small integer set: many ties.
    const int64_t distinct = rng.Range(1, 6);
    std::vector<float> score(live.size());
    for (float& v : score) v = static_cast<float>(rng.Range(0, distinct - 1));
    const int64_t budget = rng.Chance(10) ? rng.Range(0, 3) : rng.Range(0, n + 5);
    const int64_t front = rng.Chance(20) ? rng.Range(-2, 0) : rng.Range(0, budget + 5);
    const int64_t back = rng.Chance(20) ? rng.Range(-2, 0) : rng.Range(0, budget + 5);
    if (n > budget) ++selected_cases;

    const std::vector<int32_t> got = SelectKept(live, score, budget, front, back);
    const std::vector<int32_t> want = ReferenceSelectKept(live, score, budget, front, back);
    ASSERT_EQ(got, want) << "case " << c << ": " << Describe(live, score, budget, front, back);
    ASSERT_EQ(static_cast<int64_t>(got.size()), std::min(n, budget)) << "case " << c;
    for (size_t i = 1; i < got.size(); ++i) ASSERT_LT(got[i - 1], got[i]) << "case " << c;
    for (int32_t s : got)
      ASSERT_TRUE(std::binary_search(live.begin(), live.end(), s)) << "case " << c << " slot " << s;
  }
  EXPECT_GT(selected_cases, 1000);  // the generator really exercises eviction
}

// ---------------------------------------------------------------------------------------------
// SelectKeptAdaptive (AdaKV)

// Brute force: front/back per head, each head's best floor(alpha * want) middle slots, then the
// remaining places filled one at a time with the best (score, later slot, lower head) candidate
// left anywhere in the layer.
std::vector<std::vector<int32_t>> ReferenceAdaptive(const std::vector<std::vector<int32_t>>& live,
                                                    const std::vector<std::vector<float>>& score,
                                                    int64_t budget, int64_t front, int64_t back,
                                                    double alpha) {
  size_t longest = 0;
  for (const auto& l : live) longest = std::max(longest, l.size());
  if (static_cast<int64_t>(longest) <= budget) return live;
  budget = std::max<int64_t>(budget, 0);
  front = std::clamp<int64_t>(front, 0, budget);
  back = std::clamp<int64_t>(back, 0, budget - front);
  const int64_t want = budget - front - back;
  const auto safe = static_cast<int64_t>(std::floor(alpha * static_cast<double>(want)));
  const size_t heads = live.size();
  std::vector<std::vector<int>> state(heads);  // 0 candidate, 1 kept, 2 not a candidate
  int64_t places = static_cast<int64_t>(heads) * want;
  const auto better = [&](size_t ha, size_t ia, size_t hb, size_t ib) {
    if (score[ha][ia] != score[hb][ib]) return score[ha][ia] > score[hb][ib];
    if (live[ha][ia] != live[hb][ib]) return live[ha][ia] > live[hb][ib];
    return ha < hb;
  };
  for (size_t h = 0; h < heads; ++h) {
    const auto n = static_cast<int64_t>(live[h].size());
    state[h].assign(live[h].size(), 0);
    const int64_t f = std::min(front, n), b = std::min(back, n - f);
    for (int64_t i = 0; i < n; ++i)
      if (i < f || i >= n - b) state[h][static_cast<size_t>(i)] = 1;
    for (int64_t g = 0; g < safe; ++g) {  // the head's best remaining candidate, safe times
      size_t best = SIZE_MAX;
      for (size_t i = 0; i < live[h].size(); ++i)
        if (state[h][i] == 0 && (best == SIZE_MAX || better(h, i, h, best))) best = i;
      if (best == SIZE_MAX) break;
      state[h][best] = 3;  // kept by the safeguard
      --places;
    }
  }
  for (; places > 0; --places) {
    size_t bh = SIZE_MAX, bi = 0;
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < live[h].size(); ++i)
        if (state[h][i] == 0 && (bh == SIZE_MAX || better(h, i, bh, bi))) bh = h, bi = i;
    if (bh == SIZE_MAX) break;
    state[bh][bi] = 1;
  }
  std::vector<std::vector<int32_t>> out(heads);
  for (size_t h = 0; h < heads; ++h)
    for (size_t i = 0; i < live[h].size(); ++i)
      if (state[h][i] == 1 || state[h][i] == 3) out[h].push_back(live[h][i]);
  return out;
}

TEST(SelectKeptAdaptiveTest, MatchesBruteForceOnRandomCases) {
  Rng rng(777);
  int selected_cases = 0, uneven_cases = 0;
  for (int c = 0; c < 600; ++c) {
    const auto heads = static_cast<size_t>(rng.Range(1, 4));
    std::vector<std::vector<int32_t>> live(heads);
    std::vector<std::vector<float>> score(heads);
    const int64_t slots = rng.Range(1, 120);
    for (size_t h = 0; h < heads; ++h) {
      const int density = static_cast<int>(rng.Range(30, 100));  // heads may differ in length
      for (int32_t s = 0; s < slots; ++s)
        if (rng.Chance(density)) live[h].push_back(s);
      const int64_t distinct = rng.Range(1, 8);
      for (size_t i = 0; i < live[h].size(); ++i)
        score[h].push_back(static_cast<float>(rng.Range(0, distinct - 1)));
    }
    const int64_t budget = rng.Range(0, slots + 3);
    const int64_t front = rng.Chance(50) ? 0 : rng.Range(0, 6);
    const int64_t back = rng.Range(0, 8);
    const double alpha = rng.Chance(20) ? 0.0 : rng.Chance(20) ? 1.0 : 0.2;
    const auto got = SelectKeptAdaptive(live, score, budget, front, back, alpha);
    const auto want = ReferenceAdaptive(live, score, budget, front, back, alpha);
    ASSERT_EQ(got, want) << "case " << c << " budget " << budget << " front " << front << " back "
                         << back << " alpha " << alpha;
    int64_t kept = 0, longest = 0;
    bool uneven = false;
    for (size_t h = 0; h < heads; ++h) {
      longest = std::max<int64_t>(longest, static_cast<int64_t>(live[h].size()));
      kept += static_cast<int64_t>(got[h].size());
      uneven = uneven || got[h].size() != got[0].size();
      for (size_t i = 1; i < got[h].size(); ++i) ASSERT_LT(got[h][i - 1], got[h][i]);
    }
    if (longest > budget) {
      ++selected_cases;
      // The layer never keeps more than its pooled budget.
      ASSERT_LE(kept, static_cast<int64_t>(heads) * std::max<int64_t>(budget, 0)) << "case " << c;
    }
    uneven_cases += uneven ? 1 : 0;
  }
  EXPECT_GT(selected_cases, 300);
  EXPECT_GT(uneven_cases, 100);  // heads really get different budgets
}

TEST(SelectKeptAdaptiveTest, AFullSafeguardIsPerHeadSelection) {
  Rng rng(5);
  for (int c = 0; c < 200; ++c) {
    std::vector<std::vector<int32_t>> live(3);
    std::vector<std::vector<float>> score(3);
    for (size_t h = 0; h < 3; ++h)
      for (int32_t s = 0; s < 50; ++s) {
        live[h].push_back(s);
        score[h].push_back(static_cast<float>(rng.Range(0, 9)));
      }
    const int64_t budget = rng.Range(5, 45);
    const auto got = SelectKeptAdaptive(live, score, budget, 2, 3, /*alpha=*/1.0);
    for (size_t h = 0; h < 3; ++h)
      ASSERT_EQ(got[h], SelectKept(live[h], score[h], budget, 2, 3)) << "case " << c;
  }
}

TEST(SelectKeptAdaptiveTest, AHeadWithHighScoresTakesMorePlaces) {
  // Head 0's scores are all above head 1's: after head 1's safeguard (2 of 10 scored places)
  // head 0 takes the rest of the pooled 2 x 10 places.
  std::vector<std::vector<int32_t>> live(2);
  std::vector<std::vector<float>> score(2);
  for (int32_t s = 0; s < 40; ++s) {
    live[0].push_back(s);
    live[1].push_back(s);
    score[0].push_back(100.0f + static_cast<float>(s % 7));
    score[1].push_back(static_cast<float>(s % 5));
  }
  const auto got = SelectKeptAdaptive(live, score, 11, 0, 1, 0.2);
  EXPECT_EQ(got[0].size(), 1u + 18u);
  EXPECT_EQ(got[1].size(), 1u + 2u);
  EXPECT_EQ(got[0].back(), 39);
  EXPECT_EQ(got[1].back(), 39);
}

TEST(SelectKeptTest, KeepsAllWhenWithinBudget) {
  const std::vector<int32_t> live = {1, 4, 9};
  const std::vector<float> score = {0, 0, 0};
  EXPECT_EQ(SelectKept(live, score, 3, 0, 0), live);
  EXPECT_EQ(SelectKept(live, score, 10, 5, 5), live);
  EXPECT_TRUE(SelectKept({}, {}, 0, 0, 0).empty());
}

TEST(SelectKeptTest, FrontBackAndScores) {
  const std::vector<int32_t> live = {0, 2, 3, 5, 7, 8, 10, 11};
  const std::vector<float> score = {0, 9, 1, 8, 1, 7, 0, 0};
  // front 1 (slot 0), back 2 (slots 10, 11), the best 2 of the middle: slots 2 (9) and 5 (8).
  EXPECT_EQ(SelectKept(live, score, 5, 1, 2), (std::vector<int32_t>{0, 2, 5, 10, 11}));
  // No front/back: top 3 by score.
  EXPECT_EQ(SelectKept(live, score, 3, 0, 0), (std::vector<int32_t>{2, 5, 8}));
  // Budget 0 keeps nothing.
  EXPECT_TRUE(SelectKept(live, score, 0, 3, 3).empty());
  // Front larger than the budget is clamped.
  EXPECT_EQ(SelectKept(live, score, 2, 7, 3), (std::vector<int32_t>{0, 2}));
}

TEST(SelectKeptTest, TiesKeepTheLaterSlot) {
  const std::vector<int32_t> live = {0, 1, 2, 3, 4, 5};
  const std::vector<float> score(6, 1.0f);
  EXPECT_EQ(SelectKept(live, score, 2, 0, 0), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(SelectKept(live, score, 3, 1, 0), (std::vector<int32_t>{0, 4, 5}));
  EXPECT_EQ(SelectKept(live, score, 3, 0, 1), (std::vector<int32_t>{3, 4, 5}));
}

// ---------------------------------------------------------------------------------------------
// AvgPool1d

std::vector<float> ReferenceAvgPool(const std::vector<float>& x, int32_t kernel) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> out(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    int64_t count = 0;
    for (int64_t j = i - kernel / 2; j <= i + kernel / 2; ++j) {
      if (j < 0 || j >= n) continue;
      sum += x[static_cast<size_t>(j)];
      ++count;
    }
    out[static_cast<size_t>(i)] = static_cast<float>(sum / static_cast<double>(count));
  }
  return out;
}

TEST(AvgPool1dTest, MatchesNaiveReference) {
  Rng rng(7);
  for (int c = 0; c < 500; ++c) {
    const int64_t n = rng.Range(0, 50);
    const auto kernel = static_cast<int32_t>(2 * rng.Range(0, 4) + 1);  // 1, 3, ..., 9
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = static_cast<float>(rng.Range(-1000, 1000)) / 100.0f;
    const std::vector<float> got = AvgPool1d(x, kernel);
    const std::vector<float> want = ReferenceAvgPool(x, kernel);
    ASSERT_EQ(got.size(), want.size()) << "case " << c;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5)
          << "case " << c << " n=" << n << " kernel=" << kernel << " i=" << i;
  }
}

TEST(AvgPool1dTest, SmallExamples) {
  const std::vector<float> x = {3, 6, 9, 12};
  EXPECT_EQ(AvgPool1d(x, 1), x);
  const std::vector<float> k3 = AvgPool1d(x, 3);
  ASSERT_EQ(k3.size(), 4u);
  EXPECT_FLOAT_EQ(k3[0], 4.5f);  // (3 + 6) / 2: the window is cut at the start
  EXPECT_FLOAT_EQ(k3[1], 6.0f);
  EXPECT_FLOAT_EQ(k3[2], 9.0f);
  EXPECT_FLOAT_EQ(k3[3], 10.5f);
  const std::vector<float> k9 = AvgPool1d(x, 9);  // wider than the input: the global mean
  for (float v : k9) EXPECT_FLOAT_EQ(v, 7.5f);
  EXPECT_TRUE(AvgPool1d({}, 7).empty());
}

// ---------------------------------------------------------------------------------------------
// PyramidBudgets

TEST(PyramidBudgetsTest, OneLayerKeepsTheBudget) {
  EXPECT_EQ(PyramidBudgets(128, 32, 1, 20.0f), (std::vector<int64_t>{128}));
  EXPECT_EQ(PyramidBudgets(50, 8, 1, 2.0f), (std::vector<int64_t>{50}));
}

TEST(PyramidBudgetsTest, ShapeAndMean) {
  struct Case {
    int64_t budget, window;
    int32_t n_layer;
    float beta;
  };
  const Case cases[] = {
      {128, 32, 2, 20.0f},  {128, 32, 32, 20.0f}, {256, 32, 28, 20.0f}, {1024, 32, 40, 20.0f},
      {100, 10, 7, 1.0f},   {100, 10, 7, 3.5f},   {64, 63, 16, 20.0f},  {2048, 0, 80, 5.0f},
      {333, 17, 13, 20.0f}, {40, 8, 64, 20.0f},   {129, 32, 3, 2.0f},   {5000, 64, 126, 10.0f},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "budget=" << c.budget << " window=" << c.window
                                      << " n_layer=" << c.n_layer << " beta=" << c.beta);
    const std::vector<int64_t> b = PyramidBudgets(c.budget, c.window, c.n_layer, c.beta);
    ASSERT_EQ(b.size(), static_cast<size_t>(c.n_layer));
    for (size_t l = 1; l < b.size(); ++l) EXPECT_LE(b[l], b[l - 1]) << "layer " << l;
    for (int64_t v : b) EXPECT_GE(v, c.window);
    const auto last_prompt =
        static_cast<int64_t>(static_cast<double>(c.budget - c.window) / c.beta);
    // The integer step leaves a remainder < n_layer - 1 on the last layer.
    EXPECT_GE(b.back(), last_prompt + c.window);
    EXPECT_LE(b.back(), last_prompt + c.window + (c.n_layer - 1));
    const double mean =
        static_cast<double>(std::accumulate(b.begin(), b.end(), int64_t{0})) / c.n_layer;
    EXPECT_LE(std::abs(mean - static_cast<double>(c.budget)), c.n_layer) << "mean " << mean;
    // Tighter, from the construction: the mean exceeds the budget by half the remainder.
    EXPECT_GE(mean, static_cast<double>(c.budget) - 1e-9);
    EXPECT_LE(mean, static_cast<double>(c.budget) + (c.n_layer - 1) / 2.0 + 1e-9);
  }
}

TEST(PyramidBudgetsTest, ExactSmallCase) {
  // prompt 90, last 90/2 = 45, first 135, step (135 - 45) / 2 = 45.
  EXPECT_EQ(PyramidBudgets(100, 10, 3, 2.0f), (std::vector<int64_t>{145, 100, 55}));
  // beta 1: every layer keeps the budget.
  EXPECT_EQ(PyramidBudgets(100, 10, 4, 1.0f), (std::vector<int64_t>(4, 100)));
}

TEST(PyramidBudgetsTest, FewPromptTokensOverManyLayersKeepTheMean) {
  // A step rounded down to 0 would give every layer 2 x 32 + 8 = 72; the mean must stay 40.
  const std::vector<int64_t> b = PyramidBudgets(40, 8, 64, 20.0f);
  double mean = 0;
  for (int64_t v : b) mean += static_cast<double>(v) / static_cast<double>(b.size());
  EXPECT_NEAR(mean, 40.0, 0.5);
  EXPECT_GT(b.front(), b.back());
}

// ---------------------------------------------------------------------------------------------
// BudgetTokens and the per-kind predicates

TEST(BudgetTokensTest, AbsoluteBudgets) {
  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kH2O, 64), 1000), 64);
  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kKnorm, 1), 1000), 1);
  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kTova, 500), 10), 500);  // not capped by the prompt
  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kSnapKV, 128), 1000), 128);
  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kStreaming, 64), 1000), 64);
}

TEST(BudgetTokensTest, FractionsRoundUp) {
  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kH2O, 0.2), 101), 21);
  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kH2O, 0.2), 100), 20);
  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kRandom, 0.5), 7), 4);
  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kKnorm, 0.001), 10), 1);
  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kTova, 0.25), 1000), 250);
}

TEST(BudgetTokensTest, Floors) {
  KvPolicy streaming = Policy(KvPolicyKind::kStreaming, 0.01);
  streaming.sinks = 4;
  EXPECT_EQ(BudgetTokens(streaming, 100), 5);  // sinks + 1
  streaming.sinks = 0;
  EXPECT_EQ(BudgetTokens(streaming, 100), 1);
  streaming.sinks = 10;
  streaming.budget = 3;
  EXPECT_EQ(BudgetTokens(streaming, 100), 11);

  KvPolicy snap = Policy(KvPolicyKind::kSnapKV, 0.1);
  EXPECT_EQ(BudgetTokens(snap, 100), 33);  // default window 32 + 1
  snap.window = 8;
  EXPECT_EQ(BudgetTokens(snap, 100), 10);  // ceil(10) is above window + 1
  snap.window = 16;
  EXPECT_EQ(BudgetTokens(snap, 100), 17);
  KvPolicy pyramid = Policy(KvPolicyKind::kPyramidKV, 20);
  EXPECT_EQ(BudgetTokens(pyramid, 100), 33);

  KvPolicy h2o = Policy(KvPolicyKind::kH2O, 0.01);
  EXPECT_EQ(BudgetTokens(h2o, 100), 1);  // default window: only the newest token is forced
  h2o.window = 20;
  EXPECT_EQ(BudgetTokens(h2o, 100), 21);

  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kTova, 0.01), 10), 1);
  EXPECT_EQ(BudgetTokens(Policy(KvPolicyKind::kRandom, 0.01), 0), 1);
}

TEST(KindPredicatesTest, EveryKind) {
  struct Want {
    KvPolicyKind kind;
    bool one_shot, observes, repositions;
  };
  const Want wants[] = {
      {KvPolicyKind::kNone, false, false, false},    {KvPolicyKind::kStreaming, false, false, true},
      {KvPolicyKind::kH2O, false, true, false},      {KvPolicyKind::kTova, false, true, false},
      {KvPolicyKind::kKnorm, false, false, false},   {KvPolicyKind::kSnapKV, true, true, false},
      {KvPolicyKind::kPyramidKV, true, true, false}, {KvPolicyKind::kRandom, false, false, false},
      {KvPolicyKind::kQuest, false, false, false},   {KvPolicyKind::kNsa, false, false, false},
  };
  ASSERT_EQ(std::size(wants), std::size(kAllKinds));
  for (const Want& w : wants) {
    SCOPED_TRACE(KvPolicyName(w.kind));
    EXPECT_EQ(IsOneShot(w.kind), w.one_shot);
    EXPECT_EQ(ObservesAttention(w.kind), w.observes);
    EXPECT_EQ(RepositionsKeys(w.kind), w.repositions);
  }
}

TEST(KindPredicatesTest, FrontAndRecentKept) {
  for (KvPolicyKind kind : kAllKinds) {
    SCOPED_TRACE(KvPolicyName(kind));
    KvPolicy p = Policy(kind, 100);
    p.sinks = 4;
    p.window = -1;
    EXPECT_EQ(FrontKept(p), kind == KvPolicyKind::kStreaming ? 4 : 0);
    int64_t recent = 1;
    if (kind == KvPolicyKind::kStreaming) recent = 96;
    if (kind == KvPolicyKind::kH2O) recent = 50;
    if (kind == KvPolicyKind::kSnapKV || kind == KvPolicyKind::kPyramidKV) recent = 32;
    EXPECT_EQ(RecentKept(p, 100), recent);
    EXPECT_EQ(ObservationWindow(p), 32);

    p.window = 12;
    p.sinks = 0;
    EXPECT_EQ(FrontKept(p), 0);
    recent = 1;
    if (kind == KvPolicyKind::kStreaming) recent = 100;
    if (kind == KvPolicyKind::kH2O || kind == KvPolicyKind::kSnapKV ||
        kind == KvPolicyKind::kPyramidKV)
      recent = 12;
    EXPECT_EQ(RecentKept(p, 100), recent);
    EXPECT_EQ(ObservationWindow(p), 12);
  }
  KvPolicy h2o = Policy(KvPolicyKind::kH2O, 0.3);
  EXPECT_EQ(RecentKept(h2o, 31), 15);  // budget / 2 of the resolved token budget
  h2o.window = 0;
  EXPECT_EQ(RecentKept(h2o, 31), 0);
}

// ---------------------------------------------------------------------------------------------
// SlotScores

void Fill(SlotScores& s, int32_t n_layer, int64_t slots) {
  for (int32_t l = 0; l < n_layer; ++l)
    for (int64_t i = 0; i < slots; ++i)
      s.data()[l * s.stride() + i] = static_cast<float>(100 * (l + 1) + i);
}

TEST(SlotScoresTest, EnsureGrowsAndKeepsValues) {
  SlotScores s;
  EXPECT_TRUE(s.empty());
  s.Ensure(2, 4);
  EXPECT_FALSE(s.empty());
  ASSERT_GE(s.stride(), 4);
  for (int32_t l = 0; l < 2; ++l)
    for (int64_t i = 0; i < s.stride(); ++i) EXPECT_EQ(s.layer(l)[i], 0.0f);
  Fill(s, 2, 4);

  const int64_t before = s.stride();
  s.Ensure(2, 3);  // smaller: nothing changes
  EXPECT_EQ(s.stride(), before);
  s.Ensure(2, 37);
  ASSERT_GE(s.stride(), 37);
  for (int32_t l = 0; l < 2; ++l) {
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_EQ(s.layer(l)[i], static_cast<float>(100 * (l + 1) + i)) << l << "," << i;
    for (int64_t i = 4; i < s.stride(); ++i) EXPECT_EQ(s.layer(l)[i], 0.0f) << l << "," << i;
  }

  // Many small growths keep every value (the stride grows geometrically, values move each time).
  SlotScores g;
  int64_t filled = 0;
  for (int64_t slots = 1; slots <= 200; ++slots) {
    g.Ensure(3, slots);
    ASSERT_GE(g.stride(), slots);
    for (int32_t l = 0; l < 3; ++l)
      g.data()[l * g.stride() + filled] = static_cast<float>(l * 1000 + filled);
    ++filled;
    for (int32_t l = 0; l < 3; ++l)
      for (int64_t i = 0; i < filled; ++i)
        ASSERT_EQ(g.layer(l)[i], static_cast<float>(l * 1000 + i)) << slots << " " << l << " " << i;
  }
}

TEST(SlotScoresTest, EnsureMoreLayersKeepsExistingLayers) {
  SlotScores s;
  s.Ensure(2, 5);
  Fill(s, 2, 5);
  s.Ensure(4, 5);
  ASSERT_GE(s.stride(), 5);
  for (int32_t l = 0; l < 2; ++l)
    for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(s.layer(l)[i], static_cast<float>(100 * (l + 1) + i));
  for (int32_t l = 2; l < 4; ++l)
    for (int64_t i = 0; i < s.stride(); ++i) EXPECT_EQ(s.layer(l)[i], 0.0f);
}

TEST(SlotScoresTest, CompactPermutesPerLayer) {
  SlotScores s;
  s.Ensure(3, 10);
  Fill(s, 3, 10);
  const std::vector<std::vector<int32_t>> keep = {{0, 3, 4, 9}, {5}, {1, 2, 3, 4, 5, 6, 7, 8}};
  s.Compact(keep);
  for (int32_t l = 0; l < 3; ++l) {
    const auto& k = keep[static_cast<size_t>(l)];
    for (size_t i = 0; i < k.size(); ++i)
      EXPECT_EQ(s.layer(l)[i], static_cast<float>(100 * (l + 1) + k[i])) << l << "," << i;
    for (int64_t i = static_cast<int64_t>(k.size()); i < s.stride(); ++i)
      EXPECT_EQ(s.layer(l)[i], 0.0f) << l << "," << i;
  }
}

TEST(SlotScoresTest, CompactRandomAgainstCopy) {
  Rng rng(99);
  for (int c = 0; c < 200; ++c) {
    const auto n_layer = static_cast<int32_t>(rng.Range(1, 4));
    const int64_t slots = rng.Range(1, 40);
    SlotScores s;
    s.Ensure(n_layer, slots);
    std::vector<std::vector<float>> copy(static_cast<size_t>(n_layer));
    for (int32_t l = 0; l < n_layer; ++l)
      for (int64_t i = 0; i < s.stride(); ++i) {
        const auto v = static_cast<float>(rng.Range(-50, 50));
        s.data()[l * s.stride() + i] = v;
        copy[static_cast<size_t>(l)].push_back(v);
      }
    std::vector<std::vector<int32_t>> keep(static_cast<size_t>(n_layer));
    for (auto& k : keep)
      for (int32_t i = 0; i < slots; ++i)
        if (rng.Chance(40)) k.push_back(i);
    s.Compact(keep);
    for (int32_t l = 0; l < n_layer; ++l) {
      const auto& k = keep[static_cast<size_t>(l)];
      for (int64_t i = 0; i < s.stride(); ++i) {
        const float want =
            i < static_cast<int64_t>(k.size())
                ? copy[static_cast<size_t>(l)][static_cast<size_t>(k[static_cast<size_t>(i)])]
                : 0.0f;
        ASSERT_EQ(s.layer(l)[i], want) << "case " << c << " layer " << l << " slot " << i;
      }
    }
  }
}

TEST(SlotScoresTest, ClearZeros) {
  SlotScores s;
  s.Ensure(2, 6);
  Fill(s, 2, 6);
  const int64_t stride = s.stride();
  s.Clear();
  EXPECT_EQ(s.stride(), stride);
  EXPECT_FALSE(s.empty());
  for (int32_t l = 0; l < 2; ++l)
    for (int64_t i = 0; i < s.stride(); ++i) EXPECT_EQ(s.layer(l)[i], 0.0f);
}

}  // namespace
}  // namespace kvforge::kvpolicy
