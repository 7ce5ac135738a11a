// TierLoader: jobs run on its thread, one at a time and in order; WaitForProgress returns when a
// job finishes, at once when nothing is queued, and after its bound while a job is stuck; the
// destructor waits for the running job and frees every job's captures.
#include "kvstore/tier_loader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <vector>

namespace kvforge::kvstore {
namespace {

using std::chrono::microseconds;
using std::chrono::seconds;

// Waits (bounded) until `loader` has finished `n` jobs.
bool WaitForJobs(TierLoader& loader, int64_t n) {
  for (int i = 0; i < 10000 && loader.jobs_done() < n; ++i) loader.WaitForProgress(seconds(1));
  return loader.jobs_done() >= n;
}

TEST(TierLoader, RunsJobsInOrderOffTheCallingThread) {
  TierLoader loader;
  std::vector<int> order;  // written only by the loader thread, read after it is idle
  std::atomic<bool> other_thread{true};
  const std::thread::id caller = std::this_thread::get_id();
  for (int i = 0; i < 50; ++i)
    loader.Submit([&, i] {
      order.push_back(i);
      if (std::this_thread::get_id() == caller) other_thread = false;
    });
  ASSERT_TRUE(WaitForJobs(loader, 50)) << "jobs did not finish in time";
  EXPECT_TRUE(loader.idle());
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_TRUE(other_thread);
}

TEST(TierLoader, WaitReturnsAtOnceWhenIdleAndAfterItsBoundWhenAJobIsStuck) {
  TierLoader loader;
  loader.WaitForProgress(seconds(600));  // idle: must not wait
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  loader.Submit([gate] { gate.wait(); });
  loader.WaitForProgress(microseconds(2000));  // stuck job: returns after the bound
  EXPECT_EQ(loader.jobs_done(), 0);
  EXPECT_FALSE(loader.idle());
  release.set_value();
  ASSERT_TRUE(WaitForJobs(loader, 1));
}

TEST(TierLoader, DestructionWaitsForTheRunningJobAndFreesTheRest) {
  std::atomic<int> ran{0};
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  auto holder = std::make_shared<int>(7);  // captured by the queued jobs: must be freed
  std::thread releaser;
  {
    TierLoader loader;
    loader.Submit([&, gate] {
      started.set_value();
      gate.wait();
      ++ran;
    });
    for (int i = 0; i < 5; ++i) loader.Submit([&ran, holder] { ran += 100; });
    started.get_future().wait();
    releaser = std::thread([&release] { release.set_value(); });
  }  // joins the running job
  releaser.join();
  // Whether the queued jobs started before the stop is a race; the running one always finishes.
  EXPECT_EQ(ran.load() % 100, 1) << "the running job finished before the loader went";
  EXPECT_EQ(holder.use_count(), 1) << "queued jobs freed what they held";
}

}  // namespace
}  // namespace kvforge::kvstore
