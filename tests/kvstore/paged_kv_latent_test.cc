// PagedKvCache in latent mode (MLA, ADR 0007): one stream per layer whose K and V views are the
// same bytes; writes need no V; copy-on-write, swap serialisation and compaction move each row
// once; the dtypes that cannot hold a latent are refused with a message.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "kvmeta/compaction.h"
#include "kvquant/row_codec.h"
#include "kvstore/kv_test_util.h"
#include "kvstore/paged_kv_cache.h"

namespace kvforge::kvstore {
namespace {

using kvquant::KvDtype;

constexpr int32_t kRank = 32, kRope = 32, kWidth = kRank + kRope;  // one latent row

PagedKvCacheConfig LatentConfig(KvDtype d, int32_t layers = 2) {
  PagedKvCacheConfig c = testutil::SmallCacheConfig(d, d, 1, kWidth, 16, layers);
  c.store.latent_rank = kRank;
  return c;
}

std::vector<float> ReadRow(const kernels::KvPageView& v, int64_t p) {
  std::vector<float> out(kWidth);
  kernels::DecodeKvRow(v, p, out.data());
  return out;
}

std::vector<float> RoundTrip(KvDtype d, const float* x) {
  const auto codec = *kvquant::RowCodec::Create(d, 1, kWidth);
  std::vector<uint8_t> b(static_cast<size_t>(codec.row_bytes()));
  const float one = 1.0f;
  codec.Encode(x, b.data(), &one);
  std::vector<float> y(kWidth);
  codec.Decode(b.data(), 0, kWidth, y.data(), &one);
  return y;
}

TEST(PagedKvLatentTest, OneStreamHalfTheBytesAndKAndVViewsAreTheSameRows) {
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kFp8E4M3, KvDtype::kInt8,
                    KvDtype::kQ8_0, KvDtype::kQ4_0}) {
    auto c = testutil::CreateOrFail(LatentConfig(d));
    ASSERT_NE(c, nullptr);
    PagedKvCacheConfig two = testutil::SmallCacheConfig(d, d, 1, kWidth, 16, 2);
    auto kv = testutil::CreateOrFail(two);
    ASSERT_NE(kv, nullptr);
    EXPECT_EQ(c->store().num_streams(), 1);
    EXPECT_EQ(2 * c->store().block_bytes_all_layers(), kv->store().block_bytes_all_layers());
    const std::vector<float> x = testutil::RandomRows(40, kWidth, 7);
    ASSERT_TRUE(c->AddSequence(0, 40));
    for (int32_t l = 0; l < 2; ++l) c->Write(l, 0, 0, 40, x.data(), nullptr, kWidth);
    ASSERT_TRUE(c->Fork(0, 1).ok());
    ASSERT_TRUE(c->AppendSlots(1, 1));
    const std::vector<float> y = testutil::RandomRows(1, kWidth, 8);
    c->Write(0, 1, 40, 1, y.data(), nullptr, kWidth);
    for (int64_t p = 0; p < 40; ++p) {
      const auto want = RoundTrip(d, x.data() + p * kWidth);
      EXPECT_EQ(ReadRow(c->KeyView(1, 0), p), want) << KvDtypeName(d) << " p " << p;
      EXPECT_EQ(ReadRow(c->ValueView(1, 0), p), want) << KvDtypeName(d);
      EXPECT_EQ(ReadRow(c->ValueView(0, 1), p), want) << KvDtypeName(d);  // shared prefix
    }
    EXPECT_EQ(ReadRow(c->ValueView(0, 1), 40), RoundTrip(d, y.data())) << KvDtypeName(d);
    EXPECT_EQ(c->KeyView(0, 0).base, c->ValueView(0, 0).base);
    ASSERT_TRUE(c->CheckInvariants().ok());
  }
}

TEST(PagedKvLatentTest, SwapSerialisationRoundTripsEveryLayer) {
  auto c = testutil::CreateOrFail(LatentConfig(KvDtype::kF16, 3));
  ASSERT_NE(c, nullptr);
  const std::vector<float> x = testutil::RandomRows(16, kWidth, 3);
  ASSERT_TRUE(c->AddSequence(0, 16));
  for (int32_t l = 0; l < 3; ++l) c->Write(l, 0, 0, 16, x.data() + 0, nullptr, kWidth);
  const int32_t block = c->KeyView(0, 0).block_table[0];
  KvStore& store = const_cast<KvStore&>(c->store());
  std::vector<uint8_t> bytes(store.block_bytes_all_layers());
  store.ReadBlock(block, bytes.data());
  std::vector<uint8_t> zero(bytes.size(), 0);
  store.WriteBlock(block, zero.data());
  EXPECT_NE(ReadRow(c->KeyView(2, 0), 5), RoundTrip(KvDtype::kF16, x.data() + 5 * kWidth));
  store.WriteBlock(block, bytes.data());
  for (int32_t l = 0; l < 3; ++l)
    EXPECT_EQ(ReadRow(c->ValueView(l, 0), 5), RoundTrip(KvDtype::kF16, x.data() + 5 * kWidth));
}

// Random keep sets against a plain model of the rows: each kept row arrives once, in order.
TEST(PagedKvLatentTest, CompactionMovesEachLatentRowOnce) {
  std::mt19937 rng(11);
  for (int round = 0; round < 30; ++round) {
    auto c = testutil::CreateOrFail(LatentConfig(KvDtype::kF32));
    ASSERT_NE(c, nullptr);
    const int64_t n = 20 + static_cast<int64_t>(rng() % 60);
    const std::vector<float> x = testutil::RandomRows(n, kWidth, 100 + round);
    ASSERT_TRUE(c->AddSequence(0, n));
    for (int32_t l = 0; l < 2; ++l) c->Write(l, 0, 0, n, x.data(), nullptr, kWidth);
    std::vector<std::vector<int32_t>> keep(2);
    for (auto& k : keep) {
      for (int32_t s = 0; s < n; ++s)
        if (rng() % 3 != 0) k.push_back(s);
      if (k.empty()) k.push_back(0);
    }
    auto plan = kvmeta::PlanCompaction(n, keep, {}, {});
    ASSERT_TRUE(plan.ok()) << plan.error().ToString();
    auto done = c->Compact(0, *plan, /*reposition=*/false);
    ASSERT_TRUE(done.ok() && *done);
    for (int32_t l = 0; l < 2; ++l)
      for (size_t i = 0; i < keep[static_cast<size_t>(l)].size(); ++i) {
        const int32_t src = keep[static_cast<size_t>(l)][i];
        EXPECT_EQ(ReadRow(c->ValueView(l, 0), static_cast<int64_t>(i)),
                  std::vector<float>(x.begin() + src * kWidth, x.begin() + (src + 1) * kWidth))
            << "round " << round << " layer " << l << " slot " << i;
      }
    ASSERT_TRUE(c->CheckInvariants().ok());
  }
}

TEST(PagedKvLatentTest, RefusesWhatCannotHoldALatentWithAMessage) {
  struct Case {
    KvDtype k, v;
    const char* says;
  };
  for (const Case& t : {Case{KvDtype::kKivi4, KvDtype::kKivi4, "KIVI"},
                        Case{KvDtype::kKvQuant3, KvDtype::kKvQuant3, "kvquant3"},
                        Case{KvDtype::kTurbo4, KvDtype::kTurbo4, "turbo"},
                        Case{KvDtype::kF16, KvDtype::kInt8, "must be the same"}}) {
    PagedKvCacheConfig c = LatentConfig(t.k);
    c.store.v_dtype = t.v;
    c.store.block_tokens = 32;
    auto r = PagedKvCache::Create(c);
    ASSERT_FALSE(r.ok()) << KvDtypeName(t.k);
    EXPECT_NE(r.error().message().find(t.says), std::string::npos) << r.error().message();
  }
}

}  // namespace
}  // namespace kvforge::kvstore
