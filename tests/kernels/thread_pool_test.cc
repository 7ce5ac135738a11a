#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace kvforge::kernels {
namespace {

TEST(ThreadPoolTest, RangesCoverEverythingExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 5, 16, 100, 1001}) {
      for (int64_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.ParallelForGrain(n, grain, [&](int64_t b, int64_t e, int) {
          EXPECT_TRUE(b % grain == 0);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
        for (auto& h : hits) ASSERT_EQ(h.load(), 1);
      }
    }
  }
}

TEST(ThreadPoolTest, ManyBackToBackDispatches) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int i = 0; i < 2000; ++i)
    pool.ParallelFor(64, [&](int64_t b, int64_t e, int) { sum += e - b; });
  EXPECT_EQ(sum.load(), 2000 * 64);
  EXPECT_GE(ThreadPool::DefaultThreads(), 1);
}

}  // namespace
}  // namespace kvforge::kernels
