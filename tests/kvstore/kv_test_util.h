// kv_test_util.h — what the kvstore tests share: a small cache configuration, creation that
// reports its error, and seeded random K/V rows.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "kvstore/paged_kv_cache.h"

namespace kvforge::kvstore::testutil {

// 64 blocks of `block_tokens` for `layers` layers of n_kv_head x head_dim, K and V dtype `d`.
inline PagedKvCacheConfig SmallCacheConfig(kvquant::KvDtype k, kvquant::KvDtype v,
                                           int32_t n_kv_head, int32_t head_dim,
                                           int32_t block_tokens, int32_t layers) {
  PagedKvCacheConfig c;
  c.store.n_layer = layers;
  c.store.n_kv_head = n_kv_head;
  c.store.head_dim = head_dim;
  c.store.block_tokens = block_tokens;
  c.store.num_blocks = 64;
  c.store.k_dtype = k;
  c.store.v_dtype = v;
  return c;
}

// nullptr (and a test failure) when the configuration is refused.
inline std::unique_ptr<PagedKvCache> CreateOrFail(const PagedKvCacheConfig& c) {
  auto cache = PagedKvCache::Create(c);
  EXPECT_TRUE(cache.ok()) << cache.error().ToString();
  return cache.ok() ? std::move(*cache) : nullptr;
}

// [tokens][values] standard normal floats.
inline std::vector<float> RandomRows(int64_t tokens, int64_t values, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(tokens * values));
  for (auto& v : x) v = nd(rng);
  return x;
}

}  // namespace kvforge::kvstore::testutil
