// The adaptive draft length (engine/speculation.h): a fresh sequence drafts k, one whose drafts
// are refused stops drafting but for probes that thin out, and one whose drafts are kept again
// goes back to drafting.
#include "engine/speculation.h"

#include <gtest/gtest.h>

namespace kvforge::engine {
namespace {

TEST(SpeculationTest, DraftLengthFollowsTheAcceptanceRate) {
  DraftStats s;
  EXPECT_EQ(DraftLength(s, 8, true), 8);
  EXPECT_EQ(DraftLength(s, 4, true), 4);
  EXPECT_EQ(DraftLength(s, 8, false), 8);
  for (int i = 0; i < 100 && s.acceptance >= DraftStats::kProbeBelow; ++i)
    RecordVerify(s, 4, 0);  // everything refused
  ASSERT_LT(s.acceptance, DraftStats::kProbeBelow);
  EXPECT_EQ(s.probe_every, DraftStats::kProbeFirst);
  // Probes: one draft after kProbeFirst quiet steps, then the gap doubles after each failed one.
  int64_t gaps[3] = {0, 0, 0};
  for (int p = 0; p < 3; ++p) {
    int64_t steps = 0;
    while (DraftLength(s, 8, true) == 0) ++steps;
    gaps[p] = steps + 1;
    RecordVerify(s, 1, 0);
  }
  EXPECT_EQ(gaps[0], DraftStats::kProbeFirst);
  EXPECT_EQ(gaps[1], 2 * DraftStats::kProbeFirst);
  EXPECT_EQ(gaps[2], 4 * DraftStats::kProbeFirst);
  EXPECT_EQ(DraftLength(s, 8, false), 8);  // not adaptive: always k
  // Kept drafts bring the estimate back up, and with it the length.
  for (int i = 0; i < 30; ++i) RecordVerify(s, 4, 4);
  EXPECT_GT(s.acceptance, 0.9);
  EXPECT_EQ(DraftLength(s, 8, true), 8);
  EXPECT_EQ(s.probe_every, DraftStats::kProbeFirst);
}

TEST(SpeculationTest, RecordVerifyCountsTrialsUpToTheFirstRefusal) {
  DraftStats a, b;
  RecordVerify(a, 4, 2);  // 2 kept, the third refused: 3 trials, rate 2/3
  RecordVerify(b, 2, 2);  // both kept: 2 trials, rate 1
  EXPECT_LT(a.acceptance, b.acceptance);
  DraftStats c;
  const double before = c.acceptance;
  RecordVerify(c, 0, 0);  // nothing drafted: nothing learnt
  EXPECT_EQ(c.acceptance, before);
}

}  // namespace
}  // namespace kvforge::engine
