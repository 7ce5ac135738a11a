// The routing decision: cache wins when load is balanced and the prefix is long enough, the least
// loaded worker wins otherwise, round robin takes turns, unhealthy workers are never chosen; and
// over random states the invariants hold.
#include "router/route_policy.h"

#include <gtest/gtest.h>

#include <random>

namespace kvforge::router {
namespace {

WorkerView W(bool healthy, int64_t in_flight, size_t matched) {
  return WorkerView{healthy, in_flight, matched};
}

TEST(RoutePolicy, LongestCachedPrefixWinsWhenBalanced) {
  RouteOptions o;
  uint64_t turn = 0;
  const RouteChoice c =
      ChooseWorker({W(true, 2, 64), W(true, 3, 192), W(true, 0, 0)}, 256, o, &turn);
  EXPECT_EQ(c.worker, 1);
  EXPECT_TRUE(c.by_cache);
}

TEST(RoutePolicy, AShortMatchGoesToTheLeastLoaded) {
  RouteOptions o;
  uint64_t turn = 0;
  const RouteChoice c = ChooseWorker({W(true, 2, 64), W(true, 1, 0), W(true, 3, 0)}, 256, o, &turn);
  EXPECT_EQ(c.worker, 1) << "64 of 256 characters is under the 0.5 threshold";
  EXPECT_FALSE(c.by_cache);
}

TEST(RoutePolicy, ImbalanceOverridesTheCache) {
  RouteOptions o;
  o.balance_abs = 4;
  uint64_t turn = 0;
  RouteChoice c = ChooseWorker({W(true, 10, 256), W(true, 1, 0)}, 256, o, &turn);
  EXPECT_EQ(c.worker, 1) << "10 vs 1 in flight is imbalanced";
  c = ChooseWorker({W(true, 4, 256), W(true, 1, 0)}, 256, o, &turn);
  EXPECT_EQ(c.worker, 0) << "a gap of 3 is not";
}

TEST(RoutePolicy, UnhealthyWorkersAreNeverChosen) {
  RouteOptions o;
  uint64_t turn = 0;
  EXPECT_EQ(ChooseWorker({W(false, 0, 256), W(true, 5, 0)}, 256, o, &turn).worker, 1);
  EXPECT_EQ(ChooseWorker({W(false, 0, 0), W(false, 0, 0)}, 10, o, &turn).worker, -1);
  EXPECT_EQ(ChooseWorker({}, 10, o, &turn).worker, -1);
}

TEST(RoutePolicy, RoundRobinTakesTurnsOverHealthyWorkers) {
  RouteOptions o;
  o.policy = RoutePolicy::kRoundRobin;
  uint64_t turn = 0;
  std::vector<int> got;
  for (int i = 0; i < 6; ++i)
    got.push_back(
        ChooseWorker({W(true, 0, 999), W(false, 0, 0), W(true, 9, 0)}, 10, o, &turn).worker);
  EXPECT_EQ(got, (std::vector<int>{0, 2, 0, 2, 0, 2}));
}

TEST(RoutePolicy, IdleWorkersShareNewPrefixes) {
  RouteOptions o;
  uint64_t turn = 0;
  std::vector<int> got;
  for (int i = 0; i < 4; ++i)
    got.push_back(ChooseWorker({W(true, 0, 0), W(true, 0, 0)}, 100, o, &turn).worker);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 0, 1}));
}

TEST(RoutePolicy, InvariantsOverRandomStates) {
  std::mt19937 rng(5);
  uint64_t turn = 0;
  for (int round = 0; round < 2000; ++round) {
    RouteOptions o;
    o.cache_threshold = (rng() % 11) / 10.0;
    o.balance_abs = rng() % 8;
    std::vector<WorkerView> ws(1 + rng() % 5);
    for (WorkerView& w : ws) w = W(rng() % 4 != 0, rng() % 12, (rng() % 9) * 16);
    const size_t prompt = 1 + rng() % 160;
    const RouteChoice c = ChooseWorker(ws, prompt, o, &turn);
    bool any = false;
    for (const WorkerView& w : ws) any = any || w.healthy;
    ASSERT_EQ(c.worker >= 0, any) << "round " << round;
    if (c.worker < 0) continue;
    const WorkerView& w = ws[static_cast<size_t>(c.worker)];
    ASSERT_TRUE(w.healthy);
    if (c.by_cache) {
      ASSERT_GE(static_cast<double>(w.matched_chars), o.cache_threshold * prompt);
      for (const WorkerView& v : ws)
        if (v.healthy) {
          ASSERT_LE(v.matched_chars, w.matched_chars) << "not the longest match";
        }
    } else {
      for (const WorkerView& v : ws)
        if (v.healthy) {
          ASSERT_GE(v.in_flight, w.in_flight) << "not the least loaded";
        }
    }
  }
}

TEST(RoutePolicy, Names) {
  EXPECT_EQ(*ParseRoutePolicy("round_robin"), RoutePolicy::kRoundRobin);
  EXPECT_FALSE(ParseRoutePolicy("random").ok());
}

}  // namespace
}  // namespace kvforge::router
