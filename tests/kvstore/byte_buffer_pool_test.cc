// Unit and property tests for kvstore::ByteBufferPool against a simple model (a list of sizes).
#include "kvstore/byte_buffer_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <thread>

namespace kvforge::kvstore {
namespace {

TEST(ByteBufferPool, ReusesABufferOfTheSameSizeOnly) {
  ByteBufferPool pool(2);
  std::vector<uint8_t> a = pool.Take(100);
  ASSERT_EQ(a.size(), 100u);
  EXPECT_EQ(std::count(a.begin(), a.end(), 0), 100) << "a new buffer is zeroed";
  a[7] = 42;
  const uint8_t* where = a.data();
  pool.Give(std::move(a));
  std::vector<uint8_t> other = pool.Take(50);
  EXPECT_EQ(other.size(), 50u);
  EXPECT_EQ(pool.reused(), 0) << "no buffer of 50 bytes was kept";
  std::vector<uint8_t> again = pool.Take(100);
  EXPECT_EQ(again.data(), where) << "the same storage, no new allocation";
  EXPECT_EQ(again[7], 42) << "old bytes are left for the caller to overwrite";
  EXPECT_EQ(pool.reused(), 1);
  EXPECT_EQ(pool.kept(), 0u);
  pool.Give({});  // an empty buffer is not kept
  EXPECT_EQ(pool.kept(), 0u);
}

TEST(ByteBufferPool, FollowsAModelOverRandomOperations) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const size_t cap = 1 + rng() % 4;
    ByteBufferPool pool(cap);
    std::deque<size_t> model;  // sizes kept, oldest first
    int64_t reuses = 0;
    std::vector<std::vector<uint8_t>> held;
    for (int op = 0; op < 300; ++op) {
      if (rng() % 2 == 0 || held.empty()) {
        const size_t size = 1 + rng() % 5;
        auto it = std::find(model.begin(), model.end(), size);
        if (it != model.end()) {
          model.erase(it);
          ++reuses;
        }
        held.push_back(pool.Take(size));
        ASSERT_EQ(held.back().size(), size);
      } else {
        const size_t i = rng() % held.size();
        model.push_back(held[i].size());
        if (model.size() > cap) model.pop_front();
        pool.Give(std::move(held[i]));
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      }
      ASSERT_EQ(pool.kept(), model.size());
      ASSERT_EQ(pool.reused(), reuses);
    }
  }
}

TEST(ByteBufferPool, TakeAndGiveFromTwoThreads) {
  ByteBufferPool pool(4);
  std::thread giver([&] {
    for (int i = 0; i < 2000; ++i) pool.Give(std::vector<uint8_t>(64, 1));
  });
  size_t taken = 0;
  for (int i = 0; i < 2000; ++i) taken += pool.Take(64).size();
  giver.join();
  EXPECT_EQ(taken, 2000u * 64);
  EXPECT_LE(pool.kept(), 4u);
}

}  // namespace
}  // namespace kvforge::kvstore
