#include "spec/ngram_drafter.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace kvforge::spec {
namespace {

// The definition, spelled out: for n = max..min, among the j < len - n with
// tokens[j, j + n) == the last n tokens, the latest of those with the most following tokens (at
// most k count); the draft is tokens[j + n, j + n + k) cut at the end.
std::vector<int32_t> Model(const std::vector<int32_t>& t, int32_t min_n, int32_t max_n, int32_t k) {
  const int64_t len = static_cast<int64_t>(t.size());
  for (int64_t n = max_n; n >= min_n; --n) {
    if (n >= len) continue;
    std::vector<int32_t> best;
    bool found = false;
    for (int64_t j = len - n - 1; j >= 0; --j) {
      bool same = true;
      for (int64_t i = 0; i < n; ++i) same = same && t[j + i] == t[len - n + i];
      if (!same) continue;
      std::vector<int32_t> out;
      for (int64_t i = j + n; i < len && static_cast<int64_t>(out.size()) < k; ++i)
        out.push_back(t[i]);
      if (!found || out.size() > best.size()) best = out;
      found = true;
    }
    if (found) return best;
  }
  return {};
}

TEST(NgramDrafterTest, ProposesWhatFollowedTheLatestMatch) {
  //                         0  1  2  3  4  5  6  7  8  9
  const std::vector<int32_t> t{5, 6, 7, 8, 9, 5, 6, 7, 1, 5, 6};
  // Suffix "5 6" last occurred at 5 (followed by 7 1 5 6); "x 5 6" with n = 3: "1 5 6" never.
  EXPECT_EQ(ProposeNgram(t, 2, 3, 3), (std::vector<int32_t>{7, 1, 5}));
  // Wanting 10, the earlier match at 0 has more after it.
  EXPECT_EQ(ProposeNgram(t, 2, 3, 10), (std::vector<int32_t>{7, 8, 9, 5, 6, 7, 1, 5, 6}));
  EXPECT_TRUE(ProposeNgram(std::vector<int32_t>{1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(ProposeNgram({}, 1, 3, 4).empty());
  EXPECT_TRUE(ProposeNgram(std::vector<int32_t>{7}, 1, 3, 4).empty());
  // A loop of period 2: the latest match has 1 token after it, an earlier one k.
  EXPECT_EQ(ProposeNgram(std::vector<int32_t>{3, 1, 2, 1, 2, 1, 2}, 2, 2, 4),
            (std::vector<int32_t>{1, 2, 1, 2}));
  // The longest suffix wins over a later, shorter one: "8 9" at 2 beats "9" at 6.
  EXPECT_EQ(ProposeNgram(std::vector<int32_t>{8, 9, 1, 2, 3, 4, 9, 0, 8, 9}, 1, 2, 2),
            (std::vector<int32_t>{1, 2}));
}

TEST(NgramDrafterTest, RandomSequencesAgreeWithTheDefinition) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t len = static_cast<int64_t>(rng() % 40);
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 5);
    std::vector<int32_t> t;
    for (int64_t i = 0; i < len; ++i) t.push_back(static_cast<int32_t>(rng() % vocab));
    const int32_t min_n = 1 + static_cast<int32_t>(rng() % 3);
    const int32_t max_n = min_n + static_cast<int32_t>(rng() % 3);
    const int32_t k = 1 + static_cast<int32_t>(rng() % 6);
    ASSERT_EQ(ProposeNgram(t, min_n, max_n, k), Model(t, min_n, max_n, k)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace kvforge::spec
