// Unit and property tests for kvstore::TierLruIndex, the LRU index of the RAM and disk tiers:
// recency order, evictions named oldest first, byte accounting, payloads kept, and the disk
// tier's start-up fill (least recent appends, then a trim); against a simple model (a vector of
// (id, size) ordered most recent first) under random operation sequences.
#include "kvstore/tier_lru_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/test_rng.h"

namespace kvforge::kvstore {
namespace {

TierKey Key(uint64_t id) { return {7, id, id * 1000 + 1}; }

std::vector<TierKey> Keys(const std::vector<uint64_t>& ids) {
  std::vector<TierKey> out;
  for (uint64_t id : ids) out.push_back(Key(id));
  return out;
}

TEST(TierLruIndex, EvictsTheLeastRecentAndAHitMovesToTheFront) {
  TierLruIndex index(300);
  EXPECT_TRUE(index.Insert(Key(1), 100).empty());
  EXPECT_TRUE(index.Insert(Key(2), 100).empty());
  EXPECT_TRUE(index.Insert(Key(3), 100).empty());
  EXPECT_EQ(index.used_bytes(), 300u);
  EXPECT_EQ(index.capacity(), 300u);
  ASSERT_NE(index.Touch(Key(1)), nullptr);
  EXPECT_EQ(index.KeysMostRecentFirst(), Keys({1, 3, 2}));
  // 150 more bytes: the two least recent go, oldest first.
  EXPECT_EQ(index.Insert(Key(4), 150), Keys({2, 3}));
  EXPECT_EQ(index.KeysMostRecentFirst(), Keys({4, 1}));
  EXPECT_EQ(index.used_bytes(), 250u);
  EXPECT_EQ(index.count(), 2u);
  EXPECT_EQ(index.Touch(Key(2)), nullptr);
}

TEST(TierLruIndex, ReplacingAKeyIsNoEvictionAndFreesItsBytesFirst) {
  TierLruIndex index(200);
  index.Insert(Key(1), 100);
  index.Insert(Key(2), 100);
  // Key 1's old 100 bytes make the room: nothing else goes.
  EXPECT_TRUE(index.Insert(Key(1), 100, {9, 9}).empty());
  EXPECT_EQ(index.KeysMostRecentFirst(), Keys({1, 2}));
  EXPECT_EQ(index.used_bytes(), 200u);
  const TierLruIndex::Entry* e = index.Find(Key(1));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->size, 100u);
  EXPECT_EQ(e->payload, (std::vector<uint8_t>{9, 9}));
}

TEST(TierLruIndex, FindLeavesTheOrderAndEraseSaysWhetherItWasThere) {
  TierLruIndex index(1000);
  index.Insert(Key(1), 10);
  index.Insert(Key(2), 20);
  ASSERT_NE(index.Find(Key(1)), nullptr);
  EXPECT_EQ(index.KeysMostRecentFirst(), Keys({2, 1}));
  EXPECT_EQ(index.Find(Key(3)), nullptr);
  EXPECT_TRUE(index.Erase(Key(2)));
  EXPECT_FALSE(index.Erase(Key(2)));
  EXPECT_EQ(index.used_bytes(), 10u);
  EXPECT_EQ(index.count(), 1u);
}

TEST(TierLruIndex, AStartUpFillAppendsOldestLastAndTrimsFromThere) {
  // The disk tier feeds its files newest first, then trims to a capacity smaller than last run's.
  TierLruIndex index(250);
  index.InsertLeastRecent(Key(5), 100);
  index.InsertLeastRecent(Key(4), 100);
  index.InsertLeastRecent(Key(3), 100);
  EXPECT_EQ(index.used_bytes(), 300u) << "no eviction while filling";
  EXPECT_EQ(index.MakeRoom(0), Keys({3}));
  EXPECT_EQ(index.KeysMostRecentFirst(), Keys({5, 4}));
  EXPECT_TRUE(index.MakeRoom(0).empty());
  EXPECT_EQ(index.MakeRoom(200), Keys({4, 5})) << "200 bytes fit only in an empty index";
  EXPECT_EQ(index.count(), 0u);
}

TEST(TierLruIndex, ARecordOverTheCapacityEmptiesTheIndexAndIsStillStored) {
  TierLruIndex index(100);
  index.Insert(Key(1), 50);
  index.Insert(Key(2), 50);
  EXPECT_EQ(index.Insert(Key(3), 150), Keys({1, 2}));
  EXPECT_EQ(index.KeysMostRecentFirst(), Keys({3}));
  EXPECT_EQ(index.used_bytes(), 150u);
  EXPECT_EQ(index.Insert(Key(4), 10), Keys({3}));
}

// The specification: (id, size, payload) most recent first, evicting from the back.
class Model {
 public:
  struct Item {
    uint64_t id;
    uint64_t size;
    std::vector<uint8_t> payload;
  };
  explicit Model(uint64_t capacity) : capacity_(capacity) {}

  std::vector<uint64_t> Insert(uint64_t id, uint64_t size, std::vector<uint8_t> payload) {
    Erase(id);
    std::vector<uint64_t> dropped = MakeRoom(size);
    items_.insert(items_.begin(), Item{id, size, std::move(payload)});
    return dropped;
  }
  void InsertLeastRecent(uint64_t id, uint64_t size) {
    Erase(id);
    items_.push_back(Item{id, size, {}});
  }
  std::vector<uint64_t> MakeRoom(uint64_t size) {
    std::vector<uint64_t> dropped;
    while (Used() + size > capacity_ && !items_.empty()) {
      dropped.push_back(items_.back().id);
      items_.pop_back();
    }
    return dropped;
  }
  bool Touch(uint64_t id) {
    auto it = Locate(id);
    if (it == items_.end()) return false;
    std::rotate(items_.begin(), it, it + 1);
    return true;
  }
  bool Erase(uint64_t id) {
    auto it = Locate(id);
    if (it == items_.end()) return false;
    items_.erase(it);
    return true;
  }
  const Item* Find(uint64_t id) const {
    for (const Item& i : items_)
      if (i.id == id) return &i;
    return nullptr;
  }
  uint64_t Used() const {
    uint64_t sum = 0;
    for (const Item& i : items_) sum += i.size;
    return sum;
  }
  std::vector<TierKey> Order() const {
    std::vector<TierKey> out;
    for (const Item& i : items_) out.push_back(Key(i.id));
    return out;
  }
  size_t count() const { return items_.size(); }

 private:
  std::vector<Item>::iterator Locate(uint64_t id) {
    return std::find_if(items_.begin(), items_.end(), [&](const Item& i) { return i.id == id; });
  }

  const uint64_t capacity_;
  std::vector<Item> items_;  // most recent first
};

TEST(TierLruIndex, FollowsTheModelOverRandomOperations) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    testing::Rng rng(seed);
    // Now and then a zero capacity, where every insert empties the index.
    const uint64_t capacity = rng.Chance(10) ? 0 : static_cast<uint64_t>(rng.Range(1, 2000));
    TierLruIndex index(capacity);
    Model model(capacity);
    for (int step = 0; step < 400; ++step) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " capacity " + std::to_string(capacity) +
                   " step " + std::to_string(step));
      const uint64_t id = static_cast<uint64_t>(rng.Uniform(20));
      // Sizes from 0 up to a little over the capacity (the index must cope; the tiers refuse).
      const uint64_t size = rng.Chance(5) ? capacity + 1 + static_cast<uint64_t>(rng.Uniform(50))
                                          : static_cast<uint64_t>(rng.Range(0, capacity / 3 + 1));
      const int op = static_cast<int>(rng.Uniform(12));
      if (op < 4) {
        const std::vector<uint8_t> payload(static_cast<size_t>(rng.Uniform(4)),
                                           static_cast<uint8_t>(step));
        ASSERT_EQ(index.Insert(Key(id), size, payload), Keys(model.Insert(id, size, payload)));
      } else if (op < 7) {
        const bool want = model.Touch(id);
        ASSERT_EQ(index.Touch(Key(id)) != nullptr, want);
      } else if (op < 9) {
        ASSERT_EQ(index.Erase(Key(id)), model.Erase(id));
      } else if (op < 10) {
        index.InsertLeastRecent(Key(id), size);
        model.InsertLeastRecent(id, size);
      } else if (op < 11) {
        ASSERT_EQ(index.MakeRoom(size), Keys(model.MakeRoom(size)));
      } else {
        const Model::Item* want = model.Find(id);
        const TierLruIndex::Entry* got = index.Find(Key(id));
        ASSERT_EQ(got != nullptr, want != nullptr);
      }
      ASSERT_EQ(index.KeysMostRecentFirst(), model.Order());
      ASSERT_EQ(index.used_bytes(), model.Used());
      ASSERT_EQ(index.count(), model.count());
      // Every entry's size and payload are the ones stored last under its key.
      for (uint64_t k = 0; k < 20; ++k) {
        const Model::Item* want = model.Find(k);
        const TierLruIndex::Entry* got = index.Find(Key(k));
        ASSERT_EQ(got != nullptr, want != nullptr) << k;
        if (got == nullptr) continue;
        ASSERT_EQ(got->size, want->size) << k;
        ASSERT_EQ(got->payload, want->payload) << k;
      }
    }
  }
}

}  // namespace
}  // namespace kvforge::kvstore
