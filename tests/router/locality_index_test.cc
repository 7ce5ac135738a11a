// LocalityIndex against a plain model (every prompt each worker was sent, kept whole): over random
// inserts, matches and forgotten workers, each worker's matched length is its longest common
// prefix with the query in whole blocks. The LRU bound holds and keeps what is in use.
#include "router/locality_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>

namespace kvforge::router {
namespace {

// Longest common prefix of a and b, rounded down to whole blocks.
size_t BlockLcp(const std::string& a, const std::string& b, size_t block) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n / block * block;
}

TEST(LocalityIndex, MatchesAModelOverRandomOperations) {
  std::mt19937 rng(3);
  const size_t block = 4;
  const int workers = 3;
  // Prompts from a small alphabet, so prefixes are shared often.
  auto prompt = [&] {
    std::string s;
    const size_t len = rng() % 40;
    for (size_t i = 0; i < len; ++i) s.push_back(static_cast<char>('a' + rng() % 2));
    return s;
  };
  for (int trial = 0; trial < 20; ++trial) {
    LocalityIndex index(block, 1 << 20);  // no eviction here
    std::map<int, std::set<std::string>> model;
    for (int step = 0; step < 300; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 5) {
        const std::string p = prompt();
        const int w = static_cast<int>(rng() % workers);
        index.Insert(p, w);
        model[w].insert(p);
      } else if (op == 5) {
        const int w = static_cast<int>(rng() % workers);
        index.ForgetWorker(w);
        model.erase(w);
      } else {
        const std::string q = prompt();
        const std::vector<size_t> got = index.Match(q, workers);
        ASSERT_EQ(got.size(), static_cast<size_t>(workers));
        for (int w = 0; w < workers; ++w) {
          size_t want = 0;
          for (const std::string& p : model[w]) want = std::max(want, BlockLcp(p, q, block));
          ASSERT_EQ(got[static_cast<size_t>(w)], want)
              << "trial " << trial << " step " << step << " worker " << w << " query " << q;
        }
      }
    }
  }
}

TEST(LocalityIndex, TheBoundDropsTheLeastRecentlyUsed) {
  LocalityIndex index(2, 8);
  index.Insert("aabbccdd", 0);  // 4 keys
  index.Insert("xxyyzzww", 1);  // 4 more: full
  index.Insert("aabbccdd", 0);  // used again: most recent
  index.Insert("qqrr", 1);      // 2 new keys: the oldest two of worker 1's go
  EXPECT_EQ(index.size(), 8u);
  EXPECT_EQ(index.Match("aabbccdd", 2)[0], 8u) << "the recently used prompt is kept whole";
  EXPECT_EQ(index.Match("qqrr", 2)[1], 4u);
  EXPECT_EQ(index.Match("xxyyzzww", 2)[1], 0u) << "its first block was the least recent";
}

TEST(LocalityIndex, ShortTextAndNoWorkers) {
  LocalityIndex index(8, 100);
  index.Insert("short", 0);  // under one block: nothing to remember
  EXPECT_EQ(index.size(), 0u);
  EXPECT_TRUE(index.Match("anything at all", 0).empty());
}

}  // namespace
}  // namespace kvforge::router
