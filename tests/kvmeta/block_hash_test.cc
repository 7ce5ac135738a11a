// The one chained block hash: a key names the whole prefix (any earlier token or the salt changes
// it), lane a is the hot cache's 64-bit hash, and the values are pinned, because keys are stored
// on disk and in Redis across restarts and builds: changing them must bump the chunk format.
#include "kvmeta/block_hash.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace kvforge::kvmeta {
namespace {

std::vector<BlockKey> Keys(const std::vector<int32_t>& tokens, size_t bt, std::string_view salt) {
  std::vector<BlockKey> out;
  BlockKey k = PrefixSeedKey(salt);
  for (size_t i = 0; (i + 1) * bt <= tokens.size(); ++i) {
    k = ChainBlockKey(k, std::span(tokens).subspan(i * bt, bt));
    out.push_back(k);
  }
  return out;
}

TEST(BlockHash, LaneAIsTheHotCacheHash) {
  const std::vector<int32_t> t = {5, 6, 7, 8, 9, 10, 11, 12};
  const auto keys = Keys(t, 4, "s");
  uint64_t h = PrefixSeed("s");
  EXPECT_EQ(PrefixSeedKey("s").a, h);
  for (size_t i = 0; i < keys.size(); ++i) {
    h = ChainBlockHash(h, std::span(t).subspan(i * 4, 4));
    EXPECT_EQ(keys[i].a, h);
    EXPECT_NE(keys[i].a, keys[i].b);
  }
}

TEST(BlockHash, AKeyDependsOnEveryEarlierTokenAndTheSalt) {
  std::vector<int32_t> t(64);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(i * 3 + 1);
  const auto base = Keys(t, 8, "");
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (const BlockKey& k : base) seen.insert({k.a, k.b});
  for (size_t pos = 0; pos < t.size(); ++pos) {
    std::vector<int32_t> u = t;
    u[pos] += 1;
    const auto changed = Keys(u, 8, "");
    for (size_t b = 0; b < base.size(); ++b) {
      const bool after = b >= pos / 8;
      EXPECT_EQ(changed[b] == base[b], !after) << "token " << pos << " block " << b;
      if (after) {
        EXPECT_NE(changed[b].a, base[b].a);
        EXPECT_NE(changed[b].b, base[b].b);
        EXPECT_FALSE(seen.count({changed[b].a, changed[b].b}));
      }
    }
  }
  const auto salted = Keys(t, 8, "tenant");
  for (size_t b = 0; b < base.size(); ++b) EXPECT_NE(salted[b], base[b]);
  // Block boundaries are part of the key: the same tokens in blocks of 4 name other content.
  EXPECT_NE(Keys(t, 4, "")[1], base[0]);
}

TEST(BlockHash, ValuesArePinnedAcrossBuilds) {
  const std::vector<int32_t> t = {1, 2, 3, 4};
  const BlockKey k = ChainBlockKey(PrefixSeedKey(""), t);
  // If this fails the hash changed: bump kvstore::kChunkFormatVersion and update these values.
  EXPECT_EQ(k.a, 0xb8923a1040f0fbbaull) << std::hex << k.a;
  EXPECT_EQ(k.b, 0xb4978c2c23d320cdull) << std::hex << k.b;
}

}  // namespace
}  // namespace kvforge::kvmeta
