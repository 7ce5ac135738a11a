// KV eviction end to end on the TinyStories model (docs/adr/0005): a budget that holds
// everything changes nothing; StreamingLLM runs past the context in bounded KV; SnapKV's kept set
// does not depend on the prefill chunking; swap preemption of a compacted sequence resumes it
// exactly; parallel sampling and beam search fork compacted blocks; evicting requests never
// corrupt the prefix cache for the others; and every block comes back.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/kv_eviction.h"
#include "engine/llm_internal.h"
#include "kvforge/config_names.h"
#include "kvforge/engine.h"
#include "kvforge/llm.h"
#include "kvpolicy/selection.h"
#include "kvstore/kv_test_util.h"
#include "support/story_prompts.h"
#include "support/test_paths.h"

namespace kvforge {
namespace {

using testing::Prompts;

using testing::GoldenPrompts;

Prompts LongPrompts() { return testing::SharedPrefixPrompts(); }

SamplingParams Greedy(int n, std::optional<KvPolicy> policy = std::nullopt) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  p.kv_policy = policy;
  return p;
}

KvPolicy Policy(KvPolicyKind kind, double budget) {
  KvPolicy p;
  p.kind = kind;
  p.budget = budget;
  return p;
}

EngineConfig Base() {
  EngineConfig c;
  c.max_model_len = 512;
  c.threads = 2;
  return c;
}

std::vector<std::vector<int32_t>> Ids(const std::vector<RequestOutput>& outs) {
  std::vector<std::vector<int32_t>> ids;
  for (const auto& o : outs) ids.push_back(o.outputs.at(0).token_ids);
  return ids;
}

constexpr KvPolicyKind kAllPolicies[] = {
    KvPolicyKind::kStreaming, KvPolicyKind::kH2O,       KvPolicyKind::kTova,  KvPolicyKind::kKnorm,
    KvPolicyKind::kSnapKV,    KvPolicyKind::kPyramidKV, KvPolicyKind::kRandom};

TEST(KvEvictionEngineTest, ABudgetThatHoldsEverythingChangesNothing) {
  const Prompts prompts = LongPrompts();
  LLM plain(Base());
  ASSERT_TRUE(plain.ok());
  auto want = plain.generate(prompts, Greedy(40));
  ASSERT_TRUE(want.ok());
  for (KvPolicyKind k : kAllPolicies) {
    EngineConfig c = Base();
    c.kv_policy = Policy(k, 4096);
    LLM llm(c);
    ASSERT_TRUE(llm.ok()) << llm.status().ToString();
    auto got = llm.generate(prompts, Greedy(40));
    ASSERT_TRUE(got.ok()) << got.error().ToString();
    EXPECT_EQ(Ids(*got), Ids(*want)) << KvPolicyName(k);
    EXPECT_EQ(llm.stats().kv_compactions, 0) << KvPolicyName(k);
    EXPECT_EQ(llm.stats().kv_usage, 0.0);
  }
}

TEST(KvEvictionEngineTest, EveryPolicyBoundsTheKvAndReturnsEveryBlock) {
  const Prompts prompts = LongPrompts();
  for (KvPolicyKind k : kAllPolicies) {
    for (const char* dtype : {"f16", "q8_0", "kivi2", "kvquant3"}) {
      EngineConfig c = Base();
      ASSERT_TRUE(SetConfigField(&c, "kv_cache_dtype", dtype).ok());
      if (std::string(dtype) == "kivi2") c.enable_prefix_caching = false;
      c.kv_policy = Policy(k, 48);
      LLM llm(c);
      ASSERT_TRUE(llm.ok()) << llm.status().ToString();
      auto outs = llm.generate(prompts, Greedy(120));
      ASSERT_TRUE(outs.ok()) << KvPolicyName(k) << " " << dtype << ": " << outs.error().ToString();
      const int64_t block = c.block_size;
      for (const auto& o : *outs) {
        ASSERT_EQ(o.outputs[0].token_ids.size(), 120u);
        // PyramidKV's first layer may keep the whole prompt (its budget is up to twice the
        // mean): the table, which every layer shares, then does not shrink (docs/adr/0005).
        if (k != KvPolicyKind::kPyramidKV) {
          EXPECT_GT(o.metrics.kv_evicted_tokens, 0)
              << KvPolicyName(k) << " " << dtype << " prompt " << o.metrics.prompt_tokens
              << " peak " << o.metrics.kv_peak_tokens;
        }
        const int64_t total = o.metrics.prompt_tokens + 120;
        if (k == KvPolicyKind::kSnapKV || k == KvPolicyKind::kPyramidKV) {
          // One shot on the prompt; generated tokens are all kept.
          EXPECT_LT(o.metrics.kv_peak_tokens, total + 1);
        } else {
          // Bounded by the budget, a block of slack and one prefill chunk.
          EXPECT_LE(o.metrics.kv_peak_tokens, 48 + 32 + o.metrics.prompt_tokens)
              << KvPolicyName(k) << " " << dtype;
        }
        (void)block;
      }
      EXPECT_GT(llm.stats().kv_compactions, 0);
      EXPECT_EQ(llm.stats().kv_usage, 0.0) << KvPolicyName(k) << " " << dtype;
      EXPECT_TRUE(engine::CoreOf(llm)->cache().CheckInvariants().ok());
    }
  }
}

TEST(KvEvictionEngineTest, StreamingRunsPastTheContextInConstantKv) {
  EngineConfig c = Base();
  c.max_model_len = 128;
  c.kv_policy = Policy(KvPolicyKind::kStreaming, 48);
  LLM llm(c);
  ASSERT_TRUE(llm.ok());
  auto outs = llm.generate(Prompts{GoldenPrompts()[0]}, Greedy(2000));
  ASSERT_TRUE(outs.ok()) << outs.error().ToString();
  const RequestOutput& o = (*outs)[0];
  EXPECT_EQ(o.outputs[0].token_ids.size(), 2000u);  // 16x the context
  EXPECT_LE(o.metrics.kv_peak_tokens, 48 + c.block_size);
  EXPECT_GT(o.metrics.kv_evicted_tokens, 1900);
  // Without the policy the same request is refused: it does not fit the context.
  EngineConfig plain = c;
  plain.kv_policy = KvPolicy{};
  LLM refused(plain);
  EXPECT_FALSE(refused.generate(Prompts{GoldenPrompts()[0]}, Greedy(2000)).ok());
}

TEST(KvEvictionEngineTest, SnapKvKeepsTheSameTokensWhateverTheChunking) {
  // The observation window's attention is summed per query, so chunks that split the window give
  // the same scores (up to float rounding) and the same kept set: the outputs agree.
  const Prompts prompts = LongPrompts();
  std::vector<std::vector<std::vector<int32_t>>> runs;
  for (int64_t chunk : {512, 7, 33}) {
    EngineConfig c = Base();
    c.max_num_batched_tokens = chunk;
    c.kv_policy = Policy(KvPolicyKind::kSnapKV, 0.3);
    c.enable_prefix_caching = false;
    LLM llm(c);
    ASSERT_TRUE(llm.ok());
    auto outs = llm.generate(prompts, Greedy(32));
    ASSERT_TRUE(outs.ok()) << outs.error().ToString();
    for (const auto& o : *outs) EXPECT_GT(o.metrics.kv_evicted_tokens, 0);
    runs.push_back(Ids(*outs));
  }
  EXPECT_EQ(runs[1], runs[0]) << "chunks of 7";
  EXPECT_EQ(runs[2], runs[0]) << "chunks of 33";
}

TEST(KvEvictionEngineTest, SwapPreemptionResumesACompactedSequenceExactly) {
  const Prompts prompts = LongPrompts();
  EngineConfig c = Base();
  c.kv_policy = Policy(KvPolicyKind::kH2O, 80);
  c.enable_prefix_caching = false;
  LLM roomy(c);
  ASSERT_TRUE(roomy.ok());
  auto want = roomy.generate(prompts, Greedy(100));
  ASSERT_TRUE(want.ok());
  // 14 blocks: sequences grow to 96 slots (6 blocks) before compacting to 80, so the six
  // requests cannot all run.
  c.kv_cache_memory_bytes = 640ull * 16 * 14;
  c.preemption_mode = PreemptionMode::kSwap;
  c.swap_space_bytes = 64ull << 20;
  LLM tight(c);
  ASSERT_TRUE(tight.ok());
  auto got = tight.generate(prompts, Greedy(100));
  ASSERT_TRUE(got.ok()) << got.error().ToString();
  int64_t preemptions = 0;
  for (const auto& o : *got) preemptions += o.metrics.num_preemptions;
  EXPECT_GT(preemptions, 0) << "the pool should have forced preemptions";
  EXPECT_EQ(Ids(*got), Ids(*want));
  EXPECT_EQ(tight.stats().kv_usage, 0.0);
  // Recompute preemption runs the policy again over the recomputed tokens: it finishes and
  // returns every block (the kept set of a history-dependent policy may differ).
  c.preemption_mode = PreemptionMode::kRecompute;
  LLM recompute(c);
  auto again = recompute.generate(prompts, Greedy(100));
  ASSERT_TRUE(again.ok()) << again.error().ToString();
  for (const auto& o : *again) EXPECT_EQ(o.outputs[0].token_ids.size(), 100u);
  EXPECT_EQ(recompute.stats().kv_usage, 0.0);
}

TEST(KvEvictionEngineTest, ParallelSamplingAndBeamsForkCompactedBlocks) {
  const Prompts prompts = {LongPrompts()[0]};
  EngineConfig c = Base();
  c.kv_policy = Policy(KvPolicyKind::kSnapKV, 32);
  LLM llm(c);
  ASSERT_TRUE(llm.ok());
  SamplingParams p = Greedy(30);
  p.temperature = 0.9f;
  p.seed = 7;
  p.n = 4;
  auto outs = llm.generate(prompts, p);
  ASSERT_TRUE(outs.ok()) << outs.error().ToString();
  ASSERT_EQ((*outs)[0].outputs.size(), 4u);
  for (const auto& o : (*outs)[0].outputs) EXPECT_EQ(o.token_ids.size(), 30u);
  EXPECT_EQ(llm.stats().kv_usage, 0.0);
  SamplingParams b = Greedy(20);
  b.beam_width = 3;
  b.n = 2;
  b.ignore_eos = true;
  c.kv_policy = Policy(KvPolicyKind::kH2O, 24);
  LLM beams(c);
  auto bo = beams.generate(prompts, b);
  ASSERT_TRUE(bo.ok()) << bo.error().ToString();
  EXPECT_EQ((*bo)[0].outputs.size(), 2u);
  EXPECT_EQ(beams.stats().kv_usage, 0.0);
}

// Requests with and without eviction share prefixes in one engine; the ones without must get
// exactly what they get with prefix caching off: a compacted sequence never publishes its slots
// nor changes a cached block. Randomised over request mixes, orders and policies.
TEST(KvEvictionEngineTest, EvictingRequestsNeverCorruptThePrefixCache) {
  const Prompts prompts = LongPrompts();
  EngineConfig off = Base();
  off.enable_prefix_caching = false;
  LLM reference(off);
  ASSERT_TRUE(reference.ok());
  auto want = reference.generate(prompts, Greedy(24));
  ASSERT_TRUE(want.ok());
  std::mt19937 rng(11);
  for (const char* mode : {"hash", "radix"}) {
    for (int round = 0; round < 4; ++round) {
      EngineConfig c = Base();
      ASSERT_TRUE(SetConfigField(&c, "prefix_cache_mode", mode).ok());
      c.block_size = round % 2 == 0 ? 16 : 8;
      LLM llm(c);
      ASSERT_TRUE(llm.ok());
      EngineCore* core = engine::CoreOf(llm);
      std::map<int64_t, std::pair<size_t, bool>> which;  // request -> (prompt, evicting)
      std::map<int64_t, std::vector<int32_t>> got;
      for (int i = 0; i < 18; ++i) {
        const size_t pi = rng() % prompts.size();
        const bool evicting = rng() % 2 == 0;
        const KvPolicyKind kinds[] = {KvPolicyKind::kSnapKV, KvPolicyKind::kH2O,
                                      KvPolicyKind::kStreaming};
        auto params = Greedy(
            24, evicting ? std::optional<KvPolicy>(Policy(kinds[rng() % 3], 40)) : std::nullopt);
        auto id = core->AddRequest(
            prompts[pi], params,
            [&got](const RequestOutput& o) {
              if (o.finished) got[o.request_id] = o.outputs[0].token_ids;
            },
            0);
        ASSERT_TRUE(id.ok()) << id.error().ToString();
        which[*id] = {pi, evicting};
        if (rng() % 3 == 0) {
          ASSERT_TRUE(core->Step().ok());  // staggered arrivals
        }
      }
      for (int s = 0; s < 100000 && core->HasWork(); ++s) ASSERT_TRUE(core->Step().ok());
      ASSERT_FALSE(core->HasWork()) << "the engine did not finish within the bound";
      int64_t checked = 0;
      for (const auto& [id, w] : which) {
        ASSERT_TRUE(got.count(id)) << "request " << id << " did not finish";
        if (w.second) continue;
        EXPECT_EQ(got[id], (*want)[w.first].outputs[0].token_ids)
            << mode << " round " << round << " prompt " << w.first;
        ++checked;
      }
      EXPECT_GT(checked, 0);
      EXPECT_GT(llm.stats().prefix_cache_hit_tokens, 0) << "the prefix cache should be hit";
      EXPECT_TRUE(core->cache().CheckInvariants().ok());
      EXPECT_EQ(llm.stats().kv_usage, 0.0);
    }
  }
}

// Per-KV-head selection through SeqEviction: the observer's lanes are per (layer, KV head), each
// head keeps its own best slots (per_head: the same count; adaptive: AdaKV's pooled budget), and
// every head's rows read back at their new slots. K/V values name their token and head.
TEST(KvEvictionPerHeadTest, EachHeadKeepsItsOwnBestSlots) {
  constexpr int32_t kLayers = 2, kHeads = 2, kDim = 8, kTokens = 40;
  for (KvHeadSelection heads : {KvHeadSelection::kPerHead, KvHeadSelection::kAdaptive}) {
    SCOPED_TRACE(std::string(KvHeadSelectionName(heads)));
    auto cache = kvstore::testutil::CreateOrFail(kvstore::testutil::SmallCacheConfig(
        kvquant::KvDtype::kF32, kvquant::KvDtype::kF32, kHeads, kDim, 8, kLayers));
    ASSERT_NE(cache, nullptr);
    ASSERT_TRUE(cache->AddSequence(0, kTokens));
    std::vector<float> rows(static_cast<size_t>(kTokens * kHeads * kDim));
    for (int32_t l = 0; l < kLayers; ++l) {
      for (int32_t t = 0; t < kTokens; ++t)
        for (int32_t h = 0; h < kHeads; ++h)
          for (int32_t j = 0; j < kDim; ++j)
            rows[static_cast<size_t>((t * kHeads + h) * kDim + j)] =
                static_cast<float>(10000 * l + 1000 * h + t);
      cache->Write(l, 0, 0, kTokens, rows.data(), rows.data(), kHeads * kDim);
    }
    KvPolicy policy = Policy(KvPolicyKind::kSnapKV, 12);
    policy.window = 4;
    policy.pool_kernel = 1;
    policy.heads = heads;
    ASSERT_TRUE(ValidateKvPolicy(policy).ok());
    ASSERT_TRUE(engine::CheckPolicyFitsCache(policy, *cache).ok());
    auto evict = engine::MakeSeqEviction(policy, kTokens, kLayers, *cache);
    ASSERT_NE(evict, nullptr);
    model::SeqChunk chunk{0, 0, 0, kTokens, false, true};
    evict->PrepareChunk(*cache, 0, &chunk);
    ASSERT_NE(chunk.observed, nullptr);
    ASSERT_EQ(chunk.observed_lanes, kHeads);
    // What the forward's observer would add: distinct scores per (layer, head, slot).
    std::mt19937 rng(3);
    std::vector<std::vector<float>> lane_scores(kLayers * kHeads);
    for (int32_t lane = 0; lane < kLayers * kHeads; ++lane)
      for (int32_t p = 0; p < kTokens; ++p) {
        const float v = static_cast<float>(rng() % 100000) + (lane == 1 ? 200000.0f : 0.0f);
        chunk.observed[lane * chunk.observed_stride + p] = v;
        lane_scores[static_cast<size_t>(lane)].push_back(v);
      }
    auto done = evict->AfterStep(*cache, 0, kTokens);
    ASSERT_TRUE(done.ok()) << done.error().ToString();
    ASSERT_TRUE(*done);
    std::vector<int32_t> live(kTokens);
    for (int32_t i = 0; i < kTokens; ++i) live[static_cast<size_t>(i)] = i;
    for (int32_t l = 0; l < kLayers; ++l) {
      std::vector<std::vector<int32_t>> lives(kHeads, live), want;
      std::vector<std::vector<float>> scores(lane_scores.begin() + l * kHeads,
                                             lane_scores.begin() + (l + 1) * kHeads);
      if (heads == KvHeadSelection::kAdaptive) {
        want = kvpolicy::SelectKeptAdaptive(lives, scores, 12, 0, 4);
      } else {
        for (int32_t h = 0; h < kHeads; ++h)
          want.push_back(kvpolicy::SelectKept(live, scores[static_cast<size_t>(h)], 12, 0, 4));
      }
      if (heads == KvHeadSelection::kPerHead) {
        EXPECT_EQ(want[0].size(), 12u);
        EXPECT_EQ(want[1].size(), 12u);
        EXPECT_NE(want[0], want[1]);  // the heads' scores differ, so do their sets
      } else if (l == 0) {
        EXPECT_GT(want[1].size(), want[0].size());  // layer 0 head 1 scores far higher
      }
      for (int32_t h = 0; h < kHeads; ++h) {
        const kernels::KvPageView view = cache->KeyView(l, 0);
        const auto& w = want[static_cast<size_t>(h)];
        EXPECT_EQ(cache->LiveSlots(l, 0, h), static_cast<int64_t>(w.size()));
        std::vector<float> row(kHeads * kDim);
        for (size_t i = 0; i < w.size(); ++i) {
          kernels::DecodeKvRow(view, static_cast<int64_t>(i), row.data());
          ASSERT_EQ(row[static_cast<size_t>(h * kDim)],
                    static_cast<float>(10000 * l + 1000 * h + w[i]))
              << "layer " << l << " head " << h << " slot " << i;
        }
      }
    }
    EXPECT_TRUE(cache->CheckInvariants().ok());
  }
}

// End to end on the GQA TinyStories model (4 KV heads): per_head keeps exactly the budget per
// head; adaptive bounds the layer's pooled budget; both with every dtype whose heads are stored
// apart; dtypes whose heads share bytes and policies without scores are refused with a message.
TEST(KvEvictionPerHeadTest, PerHeadPoliciesRunEndToEndAndReturnEveryBlock) {
  const Prompts prompts = LongPrompts();
  for (KvHeadSelection heads : {KvHeadSelection::kPerHead, KvHeadSelection::kAdaptive}) {
    for (KvPolicyKind k : {KvPolicyKind::kH2O, KvPolicyKind::kSnapKV, KvPolicyKind::kKnorm,
                           KvPolicyKind::kPyramidKV}) {
      for (const char* dtype : {"f16", "int8", "fp8_e4m3"}) {
        SCOPED_TRACE(std::string(KvHeadSelectionName(heads)) + " " + std::string(KvPolicyName(k)) +
                     " " + dtype);
        EngineConfig c = Base();
        ASSERT_TRUE(SetConfigField(&c, "kv_cache_dtype", dtype).ok());
        c.kv_policy = Policy(k, 48);
        c.kv_policy.heads = heads;
        LLM llm(c);
        ASSERT_TRUE(llm.ok()) << llm.status().ToString();
        auto outs = llm.generate(prompts, Greedy(60));
        ASSERT_TRUE(outs.ok()) << outs.error().ToString();
        for (const auto& o : *outs) {
          ASSERT_EQ(o.outputs[0].token_ids.size(), 60u);
          // Adaptive budgets (and PyramidKV's first layer) may let one head keep the whole
          // prompt: the table, which all heads share, then does not shrink.
          if (k != KvPolicyKind::kPyramidKV && heads == KvHeadSelection::kPerHead) {
            EXPECT_GT(o.metrics.kv_evicted_tokens, 0);
          }
          if (heads == KvHeadSelection::kPerHead && k == KvPolicyKind::kSnapKV) {
            // One shot at the end of the prompt: every head keeps 48, so the table is 48.
            EXPECT_EQ(o.metrics.kv_evicted_tokens, o.metrics.prompt_tokens - 48);
          }
        }
        EXPECT_GT(llm.stats().kv_compactions, 0);
        EXPECT_EQ(llm.stats().kv_usage, 0.0);
        EXPECT_TRUE(engine::CoreOf(llm)->cache().CheckInvariants().ok());
      }
    }
  }
  // head_dim 8: a q8_0 block spans four heads.
  EngineConfig q8 = Base();
  ASSERT_TRUE(SetConfigField(&q8, "kv_cache_dtype", "q8_0").ok());
  q8.kv_policy = Policy(KvPolicyKind::kSnapKV, 48);
  q8.kv_policy.heads = KvHeadSelection::kPerHead;
  LLM refused(q8);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("share bytes between KV heads"), std::string::npos)
      << refused.status().message();
  LLM plain(Base());
  ASSERT_TRUE(plain.ok());
  KvPolicy streaming = Policy(KvPolicyKind::kStreaming, 48);
  streaming.heads = KvHeadSelection::kPerHead;
  auto r = plain.generate(Prompts{GoldenPrompts()[0]}, Greedy(4, streaming));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("same tokens in every KV head"), std::string::npos);
}

// With one KV head (falcon's MQA) a head's set is the layer's: shared, per_head and adaptive
// give the same tokens.
TEST(KvEvictionPerHeadTest, OneKvHeadMakesEverySelectionTheSame) {
  const Prompts prompts = {LongPrompts()[0], LongPrompts()[1]};
  std::vector<std::vector<std::vector<int32_t>>> runs;
  for (KvHeadSelection heads :
       {KvHeadSelection::kShared, KvHeadSelection::kPerHead, KvHeadSelection::kAdaptive}) {
    EngineConfig c = Base();
    c.model = kvforge::testing::SharedDir() + "/models/tiny-random-falcon.gguf";
    c.max_model_len = 256;
    c.kv_policy = Policy(KvPolicyKind::kH2O, 24);
    c.kv_policy.heads = heads;
    LLM llm(c);
    ASSERT_TRUE(llm.ok()) << llm.status().ToString();
    auto outs = llm.generate(prompts, Greedy(40));
    ASSERT_TRUE(outs.ok()) << outs.error().ToString();
    EXPECT_GT(llm.stats().kv_compactions, 0);
    runs.push_back(Ids(*outs));
  }
  EXPECT_EQ(runs[1], runs[0]);
  EXPECT_EQ(runs[2], runs[0]);
}

TEST(KvEvictionEngineTest, BadPoliciesAreRejected) {
  EngineConfig c = Base();
  c.kv_policy = Policy(KvPolicyKind::kSnapKV, 0);
  LLM bad(c);
  EXPECT_FALSE(bad.ok());
  LLM llm(Base());
  ASSERT_TRUE(llm.ok());
  auto r = llm.generate(Prompts{GoldenPrompts()[0]},
                        Greedy(4, Policy(KvPolicyKind::kStreaming, 3)));  // 4 sinks >= budget 3
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("sinks"), std::string::npos) << r.error().message();
  EngineConfig contiguous = Base();
  contiguous.contiguous_kv = true;
  contiguous.kv_cache_memory_bytes = 640ull * 512 * 8;
  LLM cont(contiguous);
  ASSERT_TRUE(cont.ok());
  EXPECT_FALSE(
      cont.generate(Prompts{GoldenPrompts()[0]}, Greedy(4, Policy(KvPolicyKind::kH2O, 64))).ok());
}

// Sparse decode: with a budget covering every block, Quest and NSA read the whole cache through
// the gathered block table and must give exactly the dense outputs (every KV dtype that keeps
// its slots in the blocks, kvquant3's remembered positions included); with a small budget they
// run, evict nothing and return every block.
TEST(KvEvictionEngineTest, SparseDecodeCoveringEveryBlockIsDense) {
  const Prompts prompts = LongPrompts();
  for (const char* dtype : {"f16", "q8_0", "kvquant3", "turbo4"}) {
    EngineConfig c = Base();
    ASSERT_TRUE(SetConfigField(&c, "kv_cache_dtype", dtype).ok());
    LLM dense(c);
    ASSERT_TRUE(dense.ok());
    auto want = dense.generate(prompts, Greedy(40));
    ASSERT_TRUE(want.ok());
    for (KvPolicyKind k : {KvPolicyKind::kQuest, KvPolicyKind::kNsa}) {
      EngineConfig s = c;
      s.kv_policy = Policy(k, 4096);
      s.kv_policy.window = 0;
      LLM sparse(s);
      ASSERT_TRUE(sparse.ok()) << sparse.status().ToString();
      auto got = sparse.generate(prompts, Greedy(40));
      ASSERT_TRUE(got.ok()) << got.error().ToString();
      EXPECT_EQ(Ids(*got), Ids(*want)) << KvPolicyName(k) << " " << dtype;
      s.kv_policy = Policy(k, 48);
      LLM small(s);
      auto few = small.generate(prompts, Greedy(60));
      ASSERT_TRUE(few.ok()) << few.error().ToString();
      for (const auto& o : *few) {
        EXPECT_EQ(o.outputs[0].token_ids.size(), 60u);
        EXPECT_EQ(o.metrics.kv_evicted_tokens, 0);
      }
      EXPECT_EQ(small.stats().kv_usage, 0.0);
    }
  }
  // A request cannot ask for sparse decode from an engine that keeps no block summaries.
  LLM plain(Base());
  EXPECT_FALSE(
      plain.generate(Prompts{prompts[0]}, Greedy(4, Policy(KvPolicyKind::kQuest, 64))).ok());
}

// The single-request Engine (kvforge run / eval) evicts the same way.
TEST(KvEvictionEngineTest, SingleRequestEngineEvictsToo) {
  EngineConfig c = Base();
  c.max_model_len = 128;
  c.kv_policy = Policy(KvPolicyKind::kStreaming, 40);
  auto e = Engine::Create(c);
  ASSERT_TRUE(e.ok()) << e.error().ToString();
  auto r = (*e)->Generate(LongPrompts()[0], Greedy(500));
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->tokens.size(), 500u);
  EXPECT_LE(r->kv_peak_tokens, 40 + c.block_size + c.max_num_batched_tokens);
  EXPECT_GT(r->kv_evicted_tokens, 0);
  // Same budget through the batched engine: same tokens.
  LLM llm(c);
  auto outs = llm.generate(Prompts{LongPrompts()[0]}, Greedy(500));
  ASSERT_TRUE(outs.ok()) << outs.error().ToString();
  EXPECT_EQ((*outs)[0].outputs[0].token_ids, r->tokens);
}

// Engine::ScoreStream: without a policy its NLLs are those of LogitsAll fed one token per step;
// with streaming it scores a sequence several times the context in bounded KV; anything else
// longer than the context is refused.
TEST(KvEvictionEngineTest, ScoreStreamMatchesTokenByTokenLogitsAndRunsPastTheContext) {
  EngineConfig c = Base();
  c.max_model_len = 128;
  auto plain = Engine::Create(c);
  ASSERT_TRUE(plain.ok()) << plain.error().ToString();
  std::vector<int32_t> ids = LongPrompts()[0];
  ids.resize(std::min<size_t>(ids.size(), 100));
  auto all = (*plain)->LogitsAll(ids, std::vector<int64_t>(ids.size(), 1));
  ASSERT_TRUE(all.ok()) << all.error().ToString();
  const int64_t V = static_cast<int64_t>(all->size() / ids.size());
  std::vector<double> nll;
  ASSERT_TRUE((*plain)
                  ->ScoreStream(ids,
                                [&](int64_t i, double x, int64_t slots) {
                                  EXPECT_EQ(slots, i);
                                  nll.push_back(x);
                                  return true;
                                })
                  .ok());
  ASSERT_EQ(nll.size(), ids.size() - 1);
  for (size_t i = 1; i < ids.size(); ++i) {
    const float* row = all->data() + (i - 1) * V;
    double mx = row[0], z = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, static_cast<double>(row[j]));
    for (int64_t j = 0; j < V; ++j) z += std::exp(row[j] - mx);
    EXPECT_NEAR(nll[i - 1], mx + std::log(z) - row[ids[i]], 1e-3) << "token " << i;
  }
  std::vector<int32_t> longer;
  while (longer.size() < 600) longer.insert(longer.end(), ids.begin(), ids.end());
  EXPECT_EQ((*plain)->ScoreStream(longer, nullptr).code(), StatusCode::kInvalidArgument);

  c.kv_policy = Policy(KvPolicyKind::kStreaming, 48);
  auto streaming = Engine::Create(c);
  ASSERT_TRUE(streaming.ok()) << streaming.error().ToString();
  int64_t scored = 0, max_slots = 0;
  double sum = 0;
  ASSERT_TRUE((*streaming)
                  ->ScoreStream(longer,
                                [&](int64_t, double x, int64_t slots) {
                                  ++scored;
                                  sum += x;
                                  max_slots = std::max(max_slots, slots);
                                  return true;
                                })
                  .ok());
  EXPECT_EQ(scored, static_cast<int64_t>(longer.size()) - 1);
  EXPECT_LE(max_slots, 48 + c.block_size);
  EXPECT_TRUE(std::isfinite(sum));
  EXPECT_LT(sum / scored, 4.5);  // a story, not noise: well under uniform (ln 512 = 6.2)
}

}  // namespace
}  // namespace kvforge
