// Prefix caching end to end on the TinyStories model: greedy outputs with the cache in hash or
// radix mode equal those with it off — for prompts sharing a long prefix (hits ending mid-block),
// for prompts cached whole (the last token is still computed), under chunked prefill, with a
// pool small enough to force preemption and eviction, and across block sizes — and the cache is
// actually hit. Cache salts isolate tenants.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvforge/config_names.h"
#include "kvforge/llm.h"
#include "support/story_prompts.h"
#include "support/test_paths.h"

namespace kvforge {
namespace {

using Prompts = std::vector<std::vector<int32_t>>;

using testing::Greedy;
using testing::SharedPrefixPrompts;

EngineConfig Base(const std::string& mode) {
  EngineConfig c;
  c.max_model_len = 512;
  c.threads = 2;
  c.enable_prefix_caching = mode != "off";
  if (mode != "off") {
    EXPECT_TRUE(SetConfigField(&c, "prefix_cache_mode", mode).ok());
  }
  return c;
}

std::vector<std::vector<int32_t>> RunAll(const EngineConfig& c, const Prompts& prompts, int rounds,
                                         EngineStats* stats, int64_t* cached) {
  LLM llm(c);
  EXPECT_TRUE(llm.ok()) << llm.status().ToString();
  if (!llm.ok()) return {};
  std::vector<std::vector<int32_t>> ids;
  *cached = 0;
  for (int r = 0; r < rounds; ++r) {
    auto outs = llm.generate(prompts, Greedy(24));
    EXPECT_TRUE(outs.ok());
    if (!outs.ok()) return {};
    for (const auto& o : *outs) {
      ids.push_back(o.outputs.at(0).token_ids);
      *cached += o.metrics.cached_tokens;
    }
  }
  *stats = llm.stats();
  EXPECT_EQ(stats->kv_usage, 0.0) << "blocks left held after every request finished";
  return ids;
}

TEST(PrefixCacheEngine, OutputsEqualCacheOffInEveryRegime) {
  const Prompts prompts = SharedPrefixPrompts();
  ASSERT_GT(prompts[0].size(), 40u);
  EngineStats st;
  int64_t cached = 0;
  const auto want = RunAll(Base("off"), prompts, 2, &st, &cached);
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(st.prefix_cache_hit_tokens, 0);
  struct Variant {
    std::string name;
    EngineConfig cfg;
    bool expect_preemption = false;
  };
  for (const std::string mode : {"hash", "radix"}) {
    std::vector<Variant> variants;
    variants.push_back({"default", Base(mode)});
    EngineConfig c = Base(mode);
    c.max_num_batched_tokens = 7;
    variants.push_back({"chunked prefill of 7", c});
    c = Base(mode);
    c.block_size = 1;
    variants.push_back({"block size 1", c});
    c = Base(mode);
    c.block_size = 5;
    variants.push_back({"block size 5", c});
    c = Base(mode);
    c.kv_cache_memory_bytes = 640 * 16 * 14;  // 14 blocks: preemption and eviction
    variants.push_back({"small pool", c, true});
    for (const Variant& v : variants) {
      SCOPED_TRACE(mode + " / " + v.name);
      const auto got = RunAll(v.cfg, prompts, 2, &st, &cached);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "request " << i;
      EXPECT_TRUE(st.prefix_caching);
      EXPECT_GT(st.prefix_cache_hit_tokens, 0);
      EXPECT_GT(cached, 0);
      EXPECT_LE(st.prefix_cache_hit_tokens, st.prefix_cache_query_tokens);
      if (v.expect_preemption) {
        EXPECT_GT(st.prefix_cache_evicted_blocks, 0);
      }
    }
  }
}

TEST(PrefixCacheEngine, SecondRoundServesAllButTheLastTokenFromTheCache) {
  const Prompts prompts = SharedPrefixPrompts();
  for (const std::string mode : {"hash", "radix"}) {
    SCOPED_TRACE(mode);
    LLM llm(Base(mode));
    ASSERT_TRUE(llm.ok());
    auto first = llm.generate({prompts[2]}, Greedy(8));
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first->at(0).metrics.cached_tokens, 0);
    auto again = llm.generate({prompts[2]}, Greedy(8));
    ASSERT_TRUE(again.ok());
    const int64_t n = static_cast<int64_t>(prompts[2].size());
    if (mode == "radix")
      EXPECT_EQ(again->at(0).metrics.cached_tokens, n - 1);
    else
      EXPECT_EQ(again->at(0).metrics.cached_tokens, (n - 1) / 16 * 16);
    EXPECT_EQ(again->at(0).outputs[0].token_ids, first->at(0).outputs[0].token_ids);
  }
}

TEST(PrefixCacheEngine, SaltsIsolateTenants) {
  const Prompts prompts = SharedPrefixPrompts();
  LLM llm(Base("hash"));
  ASSERT_TRUE(llm.ok());
  SamplingParams a = Greedy(4);
  a.cache_salt = "tenant-a";
  SamplingParams b = Greedy(4);
  b.cache_salt = "tenant-b";
  ASSERT_TRUE(llm.generate({prompts[0]}, a).ok());
  auto other = llm.generate({prompts[0]}, b);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->at(0).metrics.cached_tokens, 0);
  auto same = llm.generate({prompts[0]}, a);
  ASSERT_TRUE(same.ok());
  EXPECT_GT(same->at(0).metrics.cached_tokens, 0);
}

TEST(PrefixCacheEngine, ConcurrentSharedPrefixIsComputedOnce) {
  // All prompts arrive together: the scheduler admits one, holds the others back while it
  // prefills the shared prefix, then serves it to them from the cache.
  const Prompts prompts = SharedPrefixPrompts();
  for (const std::string mode : {"hash", "radix"}) {
    SCOPED_TRACE(mode);
    LLM llm(Base(mode));
    ASSERT_TRUE(llm.ok());
    auto outs = llm.generate(prompts, Greedy(4));
    ASSERT_TRUE(outs.ok());
    int64_t cached = 0;
    for (const auto& o : *outs) cached += o.metrics.cached_tokens;
    const int64_t shared = static_cast<int64_t>(SharedPrefixPrompts()[0].size()) - 8;
    EXPECT_GE(cached, static_cast<int64_t>(prompts.size() - 1) * (shared / 16 * 16));
  }
}

TEST(PrefixCacheEngine, QuantizedKvBlocksAreSharedToo) {
  // One engine has one KV dtype, so cached blocks are always read with the codec that wrote
  // them. Outputs with caching on equal caching off for per-token quantized dtypes; KIVI keeps
  // part of each sequence outside its blocks, so the engine turns prefix caching off for it.
  const Prompts prompts = SharedPrefixPrompts();
  // Turbo rows are per token and deterministic (fixed rotation and sketch), so they share too.
  for (const std::string dtype :
       {"q8_0", "int8", "fp8_e4m3", "turbo3", "turbo4", "turbo4+qjl", "kvquant3"}) {
    SCOPED_TRACE(dtype);
    const bool qjl = dtype == "turbo4+qjl";
    EngineConfig off = Base("off");
    ASSERT_TRUE(SetConfigField(&off, "kv_cache_dtype", qjl ? "turbo4" : dtype).ok());
    off.kv_turbo_qjl = qjl;
    EngineStats st;
    int64_t cached = 0;
    const auto want = RunAll(off, prompts, 2, &st, &cached);
    for (const std::string mode : {"hash", "radix"}) {
      EngineConfig on = Base(mode);
      on.kv_cache_dtype = off.kv_cache_dtype;
      on.kv_turbo_qjl = qjl;
      const auto got = RunAll(on, prompts, 2, &st, &cached);
      EXPECT_EQ(got, want) << mode;
      EXPECT_GT(cached, 0) << mode;
    }
  }
  EngineConfig kivi = Base("hash");
  kivi.kv_cache_dtype = KvCacheDtype::kKivi4;
  LLM llm(kivi);
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  ASSERT_TRUE(llm.generate({prompts[0]}, Greedy(4)).ok());
  EXPECT_FALSE(llm.stats().prefix_caching);
}

TEST(PrefixCacheEngine, BadModeIsRejected) {
  EngineConfig c = Base("hash");
  const Status trie = SetConfigField(&c, "prefix_cache_mode", "trie");
  EXPECT_EQ(trie.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(trie.message().find("hash, radix"), std::string::npos) << trie.message();
}

}  // namespace
}  // namespace kvforge
