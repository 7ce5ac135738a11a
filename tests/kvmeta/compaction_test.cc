// Unit tests for kvmeta::PlanCompaction: input validation, and a seeded property test that
// replays random compact / append rounds on a per-layer model of slot contents.
#include "kvmeta/compaction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "support/test_rng.h"

namespace kvforge::kvmeta {
namespace {

using ::kvforge::testing::Rng;

::testing::AssertionResult IsInvalid(const Result<CompactionPlan>& r) {
  if (r.ok()) return ::testing::AssertionFailure() << "planned, expected an error";
  if (r.error().code() != StatusCode::kInvalidArgument || r.error().message().empty())
    return ::testing::AssertionFailure()
           << "expected INVALID_ARGUMENT, got " << r.error().ToString();
  return ::testing::AssertionSuccess() << r.error().ToString();
}

TEST(PlanCompactionTest, SimplePlan) {
  Result<CompactionPlan> r = PlanCompaction(10, {{0, 1, 5, 9}, {2, 3}, {0, 1, 2}}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  const CompactionPlan& p = *r;
  EXPECT_EQ(p.old_slots, 10);
  EXPECT_EQ(p.new_slots, 4);
  EXPECT_EQ(p.evicted(), 6);
  ASSERT_EQ(p.keep.size(), 3u);
  EXPECT_EQ(p.kept(0), 4);
  EXPECT_EQ(p.kept(1), 2);
  EXPECT_EQ(p.kept(2), 3);
  ASSERT_EQ(p.moves.size(), 3u);
  EXPECT_EQ(p.moves[0], (std::vector<SlotMove>{{5, 2}, {9, 3}}));
  EXPECT_EQ(p.moves[1], (std::vector<SlotMove>{{2, 0}, {3, 1}}));
  EXPECT_TRUE(p.moves[2].empty());
}

TEST(PlanCompactionTest, KeepingEverythingMovesNothing) {
  Result<CompactionPlan> r = PlanCompaction(3, {{0, 1, 2}, {0, 1, 2}}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->new_slots, 3);
  EXPECT_EQ(r->evicted(), 0);
  for (const auto& m : r->moves) EXPECT_TRUE(m.empty());
}

TEST(PlanCompactionTest, OneLayerMayKeepNothing) {
  Result<CompactionPlan> r = PlanCompaction(5, {{}, {4}}, {}, {});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->new_slots, 1);
  EXPECT_EQ(r->kept(0), 0);
  EXPECT_EQ(r->moves[1], (std::vector<SlotMove>{{4, 0}}));
}

TEST(PlanCompactionTest, RejectsEmptyKeep) {
  EXPECT_TRUE(IsInvalid(PlanCompaction(4, {}, {}, {})));
}

TEST(PlanCompactionTest, RejectsAllEmptyKeepLists) {
  EXPECT_TRUE(IsInvalid(PlanCompaction(4, {{}}, {}, {})));
  EXPECT_TRUE(IsInvalid(PlanCompaction(4, {{}, {}, {}}, {}, {})));
  EXPECT_TRUE(IsInvalid(PlanCompaction(0, {{}, {}}, {}, {})));
}

TEST(PlanCompactionTest, RejectsOutOfRangeSlots) {
  EXPECT_TRUE(IsInvalid(PlanCompaction(4, {{0, 4}}, {}, {})));
  EXPECT_TRUE(IsInvalid(PlanCompaction(4, {{-1, 2}}, {}, {})));
  EXPECT_TRUE(IsInvalid(PlanCompaction(4, {{0, 1}, {100}}, {}, {})));
  EXPECT_TRUE(IsInvalid(PlanCompaction(0, {{0}}, {}, {})));
}

TEST(PlanCompactionTest, RejectsNonAscendingAndDuplicates) {
  EXPECT_TRUE(IsInvalid(PlanCompaction(8, {{3, 1}}, {}, {})));
  EXPECT_TRUE(IsInvalid(PlanCompaction(8, {{0, 1}, {1, 5, 4}}, {}, {})));
  EXPECT_TRUE(IsInvalid(PlanCompaction(8, {{2, 2}}, {}, {})));
  EXPECT_TRUE(IsInvalid(PlanCompaction(8, {{0, 3, 3, 7}}, {}, {})));
}

TEST(PlanCompactionTest, RejectsKeptDeadSlots) {
  // Layer 1's slots [2, 5) are dead.
  const std::vector<int64_t> begin = {0, 2}, end = {0, 5};
  EXPECT_TRUE(PlanCompaction(8, {{1, 2, 3}, {0, 1, 5, 7}}, begin, end).ok());
  EXPECT_TRUE(IsInvalid(PlanCompaction(8, {{1, 2, 3}, {0, 2}}, begin, end)));
  EXPECT_TRUE(IsInvalid(PlanCompaction(8, {{1, 2, 3}, {4}}, begin, end)));
  EXPECT_TRUE(IsInvalid(PlanCompaction(8, {{1, 2, 3}, {0, 3, 6}}, begin, end)));
  // The same slots are fine in layer 0, whose dead range is empty.
  EXPECT_TRUE(PlanCompaction(8, {{2, 3, 4}, {1}}, begin, end).ok());
}

TEST(PlanCompactionTest, RejectsWrongDeadVectorSizes) {
  const std::vector<std::vector<int32_t>> keep = {{0, 1}, {1}};
  EXPECT_TRUE(IsInvalid(PlanCompaction(4, keep, {2}, {2})));
  EXPECT_TRUE(IsInvalid(PlanCompaction(4, keep, {2, 2, 2}, {2, 2, 2})));
  EXPECT_TRUE(IsInvalid(PlanCompaction(4, keep, {2, 2}, {2})));
  EXPECT_TRUE(IsInvalid(PlanCompaction(4, keep, {2, 2}, {})));
  EXPECT_TRUE(PlanCompaction(4, keep, {2, 2}, {2, 2}).ok());
}

TEST(PlanCompactionTest, LanesArePerLayerAndHead) {
  // Two layers of two heads: lane = layer * 2 + head, each with its own list and dead range.
  const std::vector<int64_t> begin = {0, 3, 0, 0}, end = {0, 6, 0, 0};
  auto plan = PlanCompaction(8, {{0, 4}, {1, 2, 7}, {5}, {6, 7}}, begin, end, 2);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->lanes_per_layer, 2);
  EXPECT_EQ(plan->new_slots, 3);
  EXPECT_EQ(plan->kept(2), 1);
  EXPECT_EQ(plan->moves[1], (std::vector<SlotMove>{{1, 0}, {2, 1}, {7, 2}}));
  EXPECT_TRUE(IsInvalid(PlanCompaction(8, {{0}, {1}, {2}}, {}, {}, 2)));  // not whole layers
  EXPECT_TRUE(IsInvalid(PlanCompaction(8, {{0}, {1}}, {}, {}, 0)));
  EXPECT_TRUE(IsInvalid(PlanCompaction(8, {{0, 4}, {3}, {5}, {6}}, begin, end, 2)));  // dead
}

// The property test's model: per layer, the token id each slot holds (-1: dead, never read).
struct Model {
  int64_t n_slots = 0;
  std::vector<std::vector<int64_t>> tokens;  // [layer][slot]
  std::vector<int64_t> dead_begin, dead_end;
  int64_t next_token = 0;

  void Append(int64_t n) {
    for (auto& t : tokens)
      for (int64_t i = 0; i < n; ++i) t.push_back(next_token + i);
    next_token += n;
    n_slots += n;
  }
  bool Dead(size_t l, int64_t slot) const {
    return !dead_begin.empty() && slot >= dead_begin[l] && slot < dead_end[l];
  }
};

void RunSeed(uint64_t seed) {
  Rng rng(seed);
  const auto n_layer = static_cast<size_t>(rng.Range(1, 5));
  Model m;
  m.tokens.resize(n_layer);
  m.Append(rng.Range(1, 40));
  for (int round = 0; round < 50; ++round) {
    SCOPED_TRACE(::testing::Message()
                 << "seed " << seed << " round " << round << " n_slots " << m.n_slots);
    // Random keep lists over each layer's live slots.
    std::vector<std::vector<int32_t>> keep(n_layer);
    const int density = static_cast<int>(rng.Range(0, 100));
    for (size_t l = 0; l < n_layer; ++l)
      for (int64_t s = 0; s < m.n_slots; ++s)
        if (!m.Dead(l, s) && rng.Range(0, 99) < density) keep[l].push_back(static_cast<int32_t>(s));
    bool any = false;
    for (const auto& k : keep) any = any || !k.empty();
    if (!any) {
      ASSERT_TRUE(IsInvalid(PlanCompaction(m.n_slots, keep, m.dead_begin, m.dead_end)));
      // Keep the newest slot of a random layer where it is live (it is in the layer that kept
      // the most last round, or in all of them when tokens were appended since).
      std::vector<size_t> live_last;
      for (size_t l = 0; l < n_layer; ++l)
        if (!m.Dead(l, m.n_slots - 1)) live_last.push_back(l);
      ASSERT_FALSE(live_last.empty());
      keep[live_last[static_cast<size_t>(rng.Uniform(static_cast<int64_t>(live_last.size())))]]
          .push_back(static_cast<int32_t>(m.n_slots - 1));
    }

    // Sometimes: the same lists plus one dead slot must be refused.
    if (!m.dead_begin.empty() && rng.Chance(20)) {
      const size_t l = static_cast<size_t>(rng.Uniform(static_cast<int64_t>(n_layer)));
      if (m.dead_end[l] > m.dead_begin[l]) {
        auto bad = keep;
        const auto dead = static_cast<int32_t>(rng.Range(m.dead_begin[l], m.dead_end[l] - 1));
        bad[l].insert(std::lower_bound(bad[l].begin(), bad[l].end(), dead), dead);
        ASSERT_TRUE(IsInvalid(PlanCompaction(m.n_slots, bad, m.dead_begin, m.dead_end)))
            << "layer " << l << " dead slot " << dead;
      }
    }

    // The expected content after compaction: the kept tokens in order.
    std::vector<std::vector<int64_t>> want(n_layer);
    int64_t max_kept = 0;
    for (size_t l = 0; l < n_layer; ++l) {
      for (int32_t s : keep[l]) {
        const int64_t tok = m.tokens[l][static_cast<size_t>(s)];
        ASSERT_GE(tok, 0) << "model: layer " << l << " keeps a dead slot " << s;
        want[l].push_back(tok);
      }
      max_kept = std::max<int64_t>(max_kept, static_cast<int64_t>(keep[l].size()));
    }

    // Dead vectors are optional when no layer has a dead range; exercise both spellings.
    std::vector<int64_t> db = m.dead_begin, de = m.dead_end;
    bool no_dead = true;
    for (size_t l = 0; l < db.size(); ++l) no_dead = no_dead && db[l] == de[l];
    if (no_dead && rng.Chance(50)) {
      db.clear();
      de.clear();
    }
    Result<CompactionPlan> r = PlanCompaction(m.n_slots, keep, db, de);
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    const CompactionPlan& plan = *r;
    ASSERT_EQ(plan.old_slots, m.n_slots);
    ASSERT_EQ(plan.new_slots, max_kept);
    ASSERT_EQ(plan.evicted(), m.n_slots - max_kept);
    ASSERT_EQ(plan.keep, keep);
    ASSERT_EQ(plan.moves.size(), n_layer);

    for (size_t l = 0; l < n_layer; ++l) {
      auto& arr = m.tokens[l];
      const auto& moves = plan.moves[l];
      size_t expected_moves = 0;
      for (size_t i = 0; i < keep[l].size(); ++i)
        expected_moves += keep[l][i] != static_cast<int32_t>(i) ? 1 : 0;
      ASSERT_EQ(moves.size(), expected_moves) << "layer " << l;
      for (size_t i = 0; i < moves.size(); ++i) {
        ASSERT_LT(moves[i].dst, moves[i].src) << "layer " << l << " move " << i;
        ASSERT_GE(moves[i].dst, 0);
        ASSERT_LT(moves[i].src, m.n_slots);
        if (i > 0) {
          ASSERT_LT(moves[i - 1].dst, moves[i].dst) << "layer " << l << " move " << i;
        }
        arr[static_cast<size_t>(moves[i].dst)] = arr[static_cast<size_t>(moves[i].src)];
      }
      const auto kept = static_cast<int64_t>(keep[l].size());
      ASSERT_EQ(plan.kept(l), kept);
      for (int64_t i = 0; i < kept; ++i)
        ASSERT_EQ(arr[static_cast<size_t>(i)], want[l][static_cast<size_t>(i)])
            << "layer " << l << " slot " << i;
      // Causality: the live tokens stay in token order.
      for (int64_t i = 1; i < kept; ++i)
        ASSERT_LT(arr[static_cast<size_t>(i - 1)], arr[static_cast<size_t>(i)]);
      // Cut the table; the layer's tail of the kept prefix is dead until the next compaction.
      arr.resize(static_cast<size_t>(plan.new_slots));
      for (int64_t i = kept; i < plan.new_slots; ++i) arr[static_cast<size_t>(i)] = -1;
    }
    m.n_slots = plan.new_slots;
    m.dead_begin.assign(n_layer, 0);
    m.dead_end.assign(n_layer, plan.new_slots);
    for (size_t l = 0; l < n_layer; ++l) m.dead_begin[l] = plan.kept(l);

    // Decode / prefill more tokens into every layer.
    m.Append(rng.Chance(10) ? 0 : rng.Range(1, 12));
  }
}

TEST(PlanCompactionPropertyTest, RandomRoundsAgainstModel) {
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    RunSeed(seed);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace kvforge::kvmeta
