// The offload tiers and their chain: the RAM and disk tiers follow a plain LRU model under
// random operation sequences (contents, byte accounting, never over capacity); the disk tier
// survives a restart, keeps models apart, and turns a full disk or a failing read (an injected
// file seam) into a refused put or a miss; the chain writes through every tier, promotes hits
// into faster tiers, serves records still queued, drops what its queue cannot hold, and forgets
// rejected records.
#include "kvstore/kv_tier.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "kvstore/tier_chain.h"
#include "kvstore/tier_files.h"
#include "support/temp_dir.h"
#include "support/test_rng.h"

namespace kvforge::kvstore {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> Record(uint64_t id, size_t size) {
  std::vector<uint8_t> r(size);
  for (size_t i = 0; i < size; ++i) r[i] = static_cast<uint8_t>(id * 31 + i);
  return r;
}

TierKey Key(uint64_t id, uint64_t fingerprint = 7) { return {fingerprint, id, id * 1000 + 1}; }

using testing::TempDir;

// The specification: an LRU list of (id, size) within a byte capacity.
class LruModel {
 public:
  explicit LruModel(uint64_t capacity) : capacity_(capacity) {}
  bool Put(uint64_t id, uint64_t size) {
    if (size > capacity_) return false;
    Erase(id);
    while (used_ + size > capacity_) {
      used_ -= lru_.back().second;
      lru_.pop_back();
    }
    lru_.push_front({id, size});
    used_ += size;
    return true;
  }
  std::optional<uint64_t> Get(uint64_t id) {
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->first != id) continue;
      lru_.splice(lru_.begin(), lru_, it);
      return lru_.front().second;
    }
    return std::nullopt;
  }
  void Erase(uint64_t id) {
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->first != id) continue;
      used_ -= it->second;
      lru_.erase(it);
      return;
    }
  }
  bool Contains(uint64_t id) const {
    for (const auto& e : lru_)
      if (e.first == id) return true;
    return false;
  }
  uint64_t used() const { return used_; }
  size_t size() const { return lru_.size(); }

 private:
  uint64_t capacity_;
  uint64_t used_ = 0;
  std::list<std::pair<uint64_t, uint64_t>> lru_;  // most recent first
};

// Random puts (sizes varied, some over capacity), gets and erases on `tier` and the model; after
// every step the tier agrees with the model on what it holds, and each record's bytes are the
// ones put last under its key.
void CheckAgainstModel(KvTier* tier, uint64_t capacity, uint64_t seed, int steps) {
  LruModel model(capacity);
  std::map<uint64_t, size_t> last_size;
  testing::Rng rng(seed);
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " step " + std::to_string(step));
    const uint64_t id = static_cast<uint64_t>(rng.Uniform(24));
    const int op = static_cast<int>(rng.Uniform(10));
    if (op < 5) {
      const size_t size = rng.Chance(5) ? capacity + 1 : static_cast<size_t>(rng.Range(1, 300));
      const bool fits = model.Put(id, size);
      EXPECT_EQ(tier->Put(Key(id), Record(id + size, size)).ok(), fits);
      if (fits) last_size[id] = size;
    } else if (op < 9) {
      const std::optional<uint64_t> want = model.Get(id);
      const auto got = tier->Get(Key(id));
      ASSERT_EQ(got.has_value(), want.has_value());
      if (got) {
        EXPECT_EQ(*got, Record(id + last_size[id], last_size[id]));
      }
    } else {
      model.Erase(id);
      tier->Erase(Key(id));
    }
    const KvTierStats st = tier->stats();
    ASSERT_EQ(st.used_bytes, model.used());
    ASSERT_EQ(st.chunks, static_cast<int64_t>(model.size()));
    ASSERT_LE(st.used_bytes, capacity);
    EXPECT_EQ(tier->Contains(Key(id)), model.Contains(id));
  }
}

TEST(RamTier, FollowsTheLruModel) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    auto tier = MakeRamTier(1000);
    CheckAgainstModel(tier.get(), 1000, seed, 400);
  }
}

TEST(DiskTier, FollowsTheLruModel) {
  for (uint64_t seed = 11; seed <= 13; ++seed) {
    TempDir dir;
    auto tier = MakeDiskTier(dir.path(), 1000, 7);
    ASSERT_TRUE(tier.ok()) << tier.error().ToString();
    CheckAgainstModel(tier->get(), 1000, seed, 250);
  }
}

TEST(DiskTier, SurvivesARestartAndKeepsModelsApart) {
  TempDir dir;
  {
    auto tier = MakeDiskTier(dir.path(), 10000, 7);
    ASSERT_TRUE(tier.ok());
    for (uint64_t id = 0; id < 6; ++id) ASSERT_TRUE((*tier)->Put(Key(id), Record(id, 500)).ok());
  }
  // A crash mid-write leaves a temporary file: the next start removes it.
  const fs::path sub = fs::path(dir.path()) / "0000000000000007";
  {
    std::FILE* f = std::fopen((sub / "x.kvc.tmp.123").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  {
    auto tier = MakeDiskTier(dir.path(), 10000, 7);
    ASSERT_TRUE(tier.ok());
    EXPECT_EQ((*tier)->stats().chunks, 6);
    EXPECT_EQ((*tier)->stats().used_bytes, 3000u);
    for (uint64_t id = 0; id < 6; ++id) {
      auto r = (*tier)->Get(Key(id));
      ASSERT_TRUE(r.has_value()) << id;
      EXPECT_EQ(*r, Record(id, 500));
    }
    EXPECT_FALSE(fs::exists(sub / "x.kvc.tmp.123"));
  }
  {
    auto other = MakeDiskTier(dir.path(), 10000, 8);  // another model's fingerprint
    ASSERT_TRUE(other.ok());
    EXPECT_EQ((*other)->stats().chunks, 0);
    EXPECT_FALSE((*other)->Get(Key(0, 8)).has_value());
  }
  {
    // Reopened smaller: trimmed to the new capacity at start.
    auto tier = MakeDiskTier(dir.path(), 1200, 7);
    ASSERT_TRUE(tier.ok());
    EXPECT_EQ((*tier)->stats().chunks, 2);
    EXPECT_LE((*tier)->stats().used_bytes, 1200u);
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(sub)) files += e.is_regular_file();
    EXPECT_EQ(files, 2u);
  }
}

TEST(DiskTier, AnUnusableDirectoryIsAClearError) {
  TempDir dir;
  const std::string file = dir.path() + "/plain-file";
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  auto tier = MakeDiskTier(file, 1000, 7);
  ASSERT_FALSE(tier.ok());
  EXPECT_NE(tier.error().message().find("disk tier"), std::string::npos) << tier.error().ToString();
  EXPECT_FALSE(MakeDiskTier("", 1000, 7).ok());
}

// POSIX files with switchable failures: writes fail as on a full disk, reads fail as on a bad
// sector.
class FaultyFiles final : public TierFiles {
 public:
  FaultyFiles() : real_(MakePosixTierFiles()) {}
  std::atomic<bool> disk_full{false};
  std::atomic<bool> reads_fail{false};
  Status MakeDirs(const std::string& d) override { return real_->MakeDirs(d); }
  Status WriteAtomic(const std::string& p, std::span<const uint8_t> b) override {
    if (disk_full) return Status::IoError("write " + p + ": No space left on device");
    return real_->WriteAtomic(p, b);
  }
  Result<std::vector<uint8_t>> Read(const std::string& p) override {
    if (reads_fail) return Status::IoError("read " + p + ": Input/output error");
    return real_->Read(p);
  }
  Status Remove(const std::string& p) override { return real_->Remove(p); }
  Result<std::vector<TierFileEntry>> List(const std::string& d) override { return real_->List(d); }

 private:
  std::unique_ptr<TierFiles> real_;
};

TEST(DiskTier, AFullDiskRefusesThePutAndAFailingReadIsAMiss) {
  TempDir dir;
  auto files = std::make_shared<FaultyFiles>();
  auto tier = MakeDiskTier(dir.path(), 10000, 7, files);
  ASSERT_TRUE(tier.ok());
  KvTier& t = **tier;
  ASSERT_TRUE(t.Put(Key(1), Record(1, 100)).ok());
  files->disk_full = true;
  EXPECT_FALSE(t.Put(Key(2), Record(2, 100)).ok());
  EXPECT_FALSE(t.Contains(Key(2)));
  EXPECT_EQ(t.stats().errors, 1);
  EXPECT_EQ(t.stats().used_bytes, 100u);
  files->disk_full = false;
  files->reads_fail = true;
  EXPECT_FALSE(t.Get(Key(1)).has_value());
  EXPECT_FALSE(t.Contains(Key(1))) << "an unreadable record is forgotten";
  EXPECT_EQ(t.stats().errors, 2);
  EXPECT_EQ(t.stats().used_bytes, 0u);
}

TEST(DiskTier, AFileDeletedBehindItsBackIsAMiss) {
  TempDir dir;
  auto tier = MakeDiskTier(dir.path(), 10000, 7);
  ASSERT_TRUE(tier.ok());
  ASSERT_TRUE((*tier)->Put(Key(3), Record(3, 64)).ok());
  for (const auto& e : fs::recursive_directory_iterator(dir.path()))
    if (e.is_regular_file()) fs::remove(e.path());
  EXPECT_FALSE((*tier)->Get(Key(3)).has_value());
  EXPECT_EQ((*tier)->stats().errors, 1);
}

std::vector<std::unique_ptr<KvTier>> RamAndDisk(const std::string& dir, uint64_t ram,
                                                uint64_t disk) {
  std::vector<std::unique_ptr<KvTier>> tiers;
  tiers.push_back(MakeRamTier(ram));
  auto d = MakeDiskTier(dir, disk, 7);
  EXPECT_TRUE(d.ok());
  if (d.ok()) tiers.push_back(std::move(*d));
  return tiers;
}

TEST(TierChain, WritesThroughEveryTierAndPromotesHits) {
  TempDir dir;
  TierChain chain(RamAndDisk(dir.path(), 250, 10000), 1 << 20);
  ASSERT_EQ(chain.num_tiers(), 2u);
  for (uint64_t id = 0; id < 4; ++id) EXPECT_TRUE(chain.Store(Key(id), Record(id, 100)));
  chain.Flush();
  // RAM holds the two newest, disk all four.
  EXPECT_EQ(chain.tier(0).stats().chunks, 2);
  EXPECT_EQ(chain.tier(1).stats().chunks, 4);
  EXPECT_FALSE(chain.tier(0).Contains(Key(0)));
  auto f = chain.Fetch(Key(0));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->tier, 1u);
  EXPECT_EQ(f->record, Record(0, 100));
  chain.Flush();
  EXPECT_TRUE(chain.tier(0).Contains(Key(0))) << "a disk hit is promoted into RAM";
  f = chain.Fetch(Key(0));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->tier, 0u);
  EXPECT_FALSE(chain.Fetch(Key(99)).has_value());
  EXPECT_TRUE(chain.Contains(Key(3)));
  EXPECT_FALSE(chain.Contains(Key(99)));
}

TEST(TierChain, RejectForgetsTheRecordInItsTier) {
  TierChain chain(
      [] {
        std::vector<std::unique_ptr<KvTier>> t;
        t.push_back(MakeRamTier(1000));
        return t;
      }(),
      1 << 20);
  chain.Store(Key(5), Record(5, 10));
  chain.Flush();
  auto f = chain.Fetch(Key(5));
  ASSERT_TRUE(f.has_value());
  chain.Reject(Key(5), f->tier);
  EXPECT_FALSE(chain.Contains(Key(5)));
  EXPECT_EQ(chain.stats()[0].errors, 1);
  chain.Reject(Key(5), 17);  // out of range: ignored
}

TEST(TierChain, ServesQueuedRecordsAndDropsWhatTheQueueCannotHold) {
  TempDir dir;
  std::atomic<bool> release{false};
  std::atomic<int> encoded{0};
  {
    TierChain chain(RamAndDisk(dir.path(), 10000, 10000), 300);
    // The first lazy record blocks the writer until released, so the others stay queued.
    ASSERT_TRUE(chain.StoreLazy(Key(1), 100, [&]() -> std::optional<std::vector<uint8_t>> {
      while (!release) std::this_thread::yield();
      ++encoded;
      return Record(1, 100);
    }));
    ASSERT_TRUE(chain.Store(Key(2), Record(2, 100)));
    ASSERT_TRUE(chain.Store(Key(3), Record(3, 100)));
    EXPECT_FALSE(chain.Store(Key(4), Record(4, 100))) << "over the 300-byte queue";
    EXPECT_EQ(chain.dropped_writes(), 1);
    EXPECT_TRUE(chain.Store(Key(2), Record(2, 100))) << "already queued";
    auto f = chain.Fetch(Key(3));
    ASSERT_TRUE(f.has_value()) << "a queued record is served before it is written";
    EXPECT_EQ(f->tier, chain.num_tiers());
    EXPECT_EQ(f->record, Record(3, 100));
    EXPECT_TRUE(chain.Contains(Key(1)));
    release = true;
    chain.Flush();
    EXPECT_EQ(encoded.load(), 1);
    for (uint64_t id : {1, 2, 3}) {
      EXPECT_TRUE(chain.tier(0).Contains(Key(id))) << id;
      EXPECT_TRUE(chain.tier(1).Contains(Key(id))) << id;
    }
    EXPECT_FALSE(chain.Contains(Key(4)));
    // An encoder that fails stores nothing.
    chain.StoreLazy(Key(6), 10, [] { return std::optional<std::vector<uint8_t>>(); });
    chain.Store(Key(7), Record(7, 50));
  }  // the destructor writes what is queued
  auto disk = MakeDiskTier(dir.path(), 10000, 7);
  ASSERT_TRUE(disk.ok());
  EXPECT_TRUE((*disk)->Contains(Key(7)));
  EXPECT_FALSE((*disk)->Contains(Key(6)));
}

TEST(TierChain, AFetchEncodesAQueuedLazyRecordOnceWhoeverComesFirst) {
  std::atomic<bool> release{false};
  std::atomic<int> encoded_a{0};
  std::atomic<int> encoded_b{0};
  TempDir dir;
  TierChain chain(RamAndDisk(dir.path(), 10000, 10000), 1 << 20);
  // A blocks the writer, so B is still queued and not encoded when it is fetched.
  ASSERT_TRUE(chain.StoreLazy(Key(1), 100, [&]() -> std::optional<std::vector<uint8_t>> {
    while (!release) std::this_thread::yield();
    ++encoded_a;
    return Record(1, 100);
  }));
  ASSERT_TRUE(chain.StoreLazy(Key(2), 100, [&]() -> std::optional<std::vector<uint8_t>> {
    ++encoded_b;
    return Record(2, 100);
  }));
  auto f = chain.Fetch(Key(2));
  ASSERT_TRUE(f.has_value()) << "Contains said yes, so Fetch must find it";
  EXPECT_EQ(f->record, Record(2, 100));
  EXPECT_EQ(encoded_b.load(), 1);
  release = true;
  // A is being encoded by the writer: the Fetch waits for it rather than missing.
  auto g = chain.Fetch(Key(1));
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->record, Record(1, 100));
  chain.Flush();
  EXPECT_EQ(encoded_a.load(), 1);
  EXPECT_EQ(encoded_b.load(), 1) << "the writer reused the record the Fetch made";
  EXPECT_TRUE(chain.tier(0).Contains(Key(2)));
}

TEST(TierChain, AFailingTierDoesNotStopTheOthers) {
  TempDir dir;
  auto files = std::make_shared<FaultyFiles>();
  files->disk_full = true;
  std::vector<std::unique_ptr<KvTier>> tiers;
  auto d = MakeDiskTier(dir.path(), 10000, 7, files);
  ASSERT_TRUE(d.ok());
  tiers.push_back(std::move(*d));
  tiers.push_back(MakeRamTier(10000));
  TierChain chain(std::move(tiers), 1 << 20);
  chain.Store(Key(1), Record(1, 10));
  chain.Flush();
  EXPECT_FALSE(chain.tier(0).Contains(Key(1)));
  EXPECT_TRUE(chain.tier(1).Contains(Key(1)));
  EXPECT_EQ(chain.stats()[0].errors, 1);
  auto f = chain.Fetch(Key(1));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->tier, 1u);
}

// A RAM tier that says it is remote and counts the questions it is asked: stands in for Redis
// where only the chain's bookkeeping is under test (the real Redis tier has its own tests).
class CountingRemoteTier final : public KvTier {
 public:
  explicit CountingRemoteTier(std::atomic<int>* contains_calls)
      : inner_(MakeRamTier(1 << 20)), contains_calls_(contains_calls) {}
  const std::string& name() const override { return inner_->name(); }
  Status Put(const TierKey& key, const std::vector<uint8_t>& record) override {
    return inner_->Put(key, record);
  }
  std::optional<std::vector<uint8_t>> Get(const TierKey& key) override { return inner_->Get(key); }
  bool Contains(const TierKey& key) const override {
    ++*contains_calls_;
    return inner_->Contains(key);
  }
  void Erase(const TierKey& key) override { inner_->Erase(key); }
  KvTierStats stats() const override { return inner_->stats(); }
  void CountCorrupt() override { inner_->CountCorrupt(); }
  void CountMiss() override { inner_->CountMiss(); }
  bool remote() const override { return true; }

 private:
  std::unique_ptr<KvTier> inner_;
  std::atomic<int>* contains_calls_;
};

TEST(TierChain, KnowsWhatItWroteToARemoteTierWithoutAskingIt) {
  std::atomic<int> asked{0};
  std::vector<std::unique_ptr<KvTier>> tiers;
  tiers.push_back(std::make_unique<CountingRemoteTier>(&asked));
  auto* remote = tiers.back().get();
  TierChain chain(std::move(tiers), 1 << 20);
  EXPECT_FALSE(chain.KnownToHold(Key(1)));
  ASSERT_TRUE(chain.Store(Key(1), Record(1, 10)));
  chain.Flush();
  const int asked_by_writer = asked.load();
  EXPECT_TRUE(chain.KnownToHold(Key(1))) << "written there by this chain";
  EXPECT_EQ(asked.load(), asked_by_writer) << "KnownToHold does no I/O";
  // Found there by a fetch: known too.
  ASSERT_TRUE(remote->Put(Key(2), Record(2, 10)).ok());
  EXPECT_FALSE(chain.KnownToHold(Key(2)));
  ASSERT_TRUE(chain.Fetch(Key(2)).has_value());
  EXPECT_TRUE(chain.KnownToHold(Key(2)));
  // Gone behind the chain's back: the next fetch misses and the belief goes with it.
  remote->Erase(Key(2));
  EXPECT_FALSE(chain.Fetch(Key(2)).has_value());
  EXPECT_FALSE(chain.KnownToHold(Key(2)));
  // Rejected (failed verification above): not known any more.
  auto f = chain.Fetch(Key(1));
  ASSERT_TRUE(f.has_value());
  chain.Reject(Key(1), f->tier);
  EXPECT_FALSE(chain.KnownToHold(Key(1)));
  // Said present when the writer asked before writing: known.
  ASSERT_TRUE(remote->Put(Key(3), Record(3, 10)).ok());
  ASSERT_TRUE(chain.Store(Key(3), Record(3, 10)));
  chain.Flush();
  EXPECT_TRUE(chain.KnownToHold(Key(3)));
}

TEST(TierChain, ABeliefAboutARemoteTierAges) {
  std::atomic<int> asked{0};
  std::vector<std::unique_ptr<KvTier>> tiers;
  tiers.push_back(std::make_unique<CountingRemoteTier>(&asked));
  TierChain chain(std::move(tiers), 1 << 20, std::chrono::milliseconds(0));
  ASSERT_TRUE(chain.Store(Key(1), Record(1, 10)));
  chain.Flush();
  EXPECT_TRUE(chain.Contains(Key(1))) << "the tier holds it";
  EXPECT_FALSE(chain.KnownToHold(Key(1))) << "a belief of age zero is never trusted";
}

}  // namespace
}  // namespace kvforge::kvstore
