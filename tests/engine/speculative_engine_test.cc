// Speculative decoding end to end (docs/adr/0020). Greedy outputs are the same tokens with and
// without drafting, for both drafters, across KV dtypes, KV policies, prefix caching, swap and
// recompute preemption, mixed batches and an MLA model; sampled outputs follow the same
// distribution (two-sample chi-square); after every step the KV every sequence holds decodes to
// what an engine that never drafted holds for the same tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "kernels/kernels.h"
#include "kvforge/config_names.h"
#include "support/story_prompts.h"
#include "support/test_paths.h"

namespace kvforge {
namespace {

std::string Stories() { return testing::SharedDir() + "/models/stories260K.gguf"; }

// Prompts that repeat themselves (prompt lookup finds matches) and the goldens' prompts.
testing::Prompts MixedPrompts() {
  testing::Prompts out = testing::GoldenPrompts();
  out.resize(std::min<size_t>(out.size(), 3));
  std::vector<int32_t> copy = out[0];
  for (int r = 0; r < 3; ++r) copy.insert(copy.end(), out[1].begin() + 1, out[1].end());
  out.push_back(copy);
  return out;
}

struct Outcome {
  std::map<int64_t, std::vector<std::vector<int32_t>>> tokens;  // request -> per completion
  EngineStats stats;
};

Outcome RunAll(const EngineConfig& cfg, const testing::Prompts& prompts,
               const SamplingParams& params) {
  Outcome o;
  auto core = EngineCore::Create(cfg);
  EXPECT_TRUE(core.ok()) << core.error().ToString();
  if (!core.ok()) return o;
  for (const auto& p : prompts) {
    auto id = (*core)->AddRequest(
        p, params,
        [&o](const RequestOutput& r) {
          if (!r.finished) return;
          for (const auto& c : r.outputs) o.tokens[r.request_id].push_back(c.token_ids);
        },
        0);
    EXPECT_TRUE(id.ok()) << id.error().ToString();
  }
  for (int i = 0; i < 20000 && (*core)->HasWork(); ++i) {
    const Status s = (*core)->Step();
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
  }
  EXPECT_FALSE((*core)->HasWork()) << "requests left after 20000 steps";
  o.stats = (*core)->Stats();
  return o;
}

struct Case {
  std::string name;
  std::vector<std::pair<std::string, std::string>> fields;  // EngineConfig fields by name
  std::string model;                                        // "" : stories260K
  SamplingParams params = testing::Greedy(40);
  bool expect_drafts = true;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

EngineConfig ConfigFor(const Case& c, bool speculate, const std::string& method) {
  EngineConfig cfg;
  cfg.model = c.model.empty() ? Stories() : c.model;
  cfg.threads = 2;
  cfg.max_model_len = 512;
  cfg.max_num_batched_tokens = 64;
  for (const auto& [k, v] : c.fields) EXPECT_TRUE(SetConfigField(&cfg, k, v).ok()) << k << "=" << v;
  if (speculate) {
    EXPECT_TRUE(SetConfigField(&cfg, "speculative_method", method).ok());
    if (method == "draft_model") {
      cfg.speculative_model = Stories();
      // A draft that is not the target: its KV is 4-bit, so some drafts are refused.
      cfg.speculative_kv_cache_dtype = KvCacheDtype::kQ4_0;
    }
    cfg.speculative_adaptive = false;  // draft every step: the paths under test always run
    cfg.num_speculative_tokens = 4;
  }
  return cfg;
}

std::vector<Case> Cases() {
  std::vector<Case> v;
  v.push_back({"f16", {}});
  for (const char* d : {"q8_0", "kivi2", "kvquant3", "turbo4", "fp8_e4m3", "f32"})
    v.push_back({d, {{"kv_cache_dtype", d}}});
  v.push_back({"no_prefix_cache", {{"enable_prefix_caching", "false"}}});
  v.push_back({"radix_prefix_cache", {{"prefix_cache_mode", "radix"}}});
  v.push_back({"streaming", {{"kv_policy", "streaming"}, {"kv_budget", "48"}, {"kv_sinks", "4"}}});
  v.push_back({"snapkv", {{"kv_policy", "snapkv"}, {"kv_budget", "40"}}});
  // H2O's observer would see drafts: its sequences never draft, and nothing changes.
  Case h2o{"h2o", {{"kv_policy", "h2o"}, {"kv_budget", "40"}}};
  h2o.expect_drafts = false;
  v.push_back(h2o);
  // A pool of 12 blocks for 4 requests of up to ~120 tokens: they preempt each other.
  v.push_back({"recompute_preemption",
               {{"kv_cache_memory_bytes", "61440"}, {"preemption_mode", "recompute"}}});
  v.push_back(
      {"swap_preemption", {{"kv_cache_memory_bytes", "61440"}, {"preemption_mode", "swap"}}});
  // A stop string that falls inside kept drafts ends the output there; n > 1 completions fork
  // the prompt and each drafts on its own.
  Case stop{"stop_string", {}};
  stop.params.stop = {" the"};
  stop.params.ignore_eos = false;
  v.push_back(stop);
  Case n3{"n3", {}};
  n3.params.n = 3;
  v.push_back(n3);
  // Everything at once: a regex constraint, speculated, on quantized KV that StreamingLLM
  // evicts, with a RAM offload tier below the (hash) prefix cache.
  Case composed{"composed",
                {{"kv_cache_dtype", "q8_0"},
                 {"kv_policy", "streaming"},
                 {"kv_budget", "48"},
                 {"kv_sinks", "4"},
                 {"kv_offload_ram_bytes", "4MiB"}}};
  composed.params.structured_outputs.regex = "[a-z ,.]{20,120}";
  v.push_back(composed);
  Case mla{"mla", {}, testing::SharedDir() + "/models/tiny-random-deepseek2.gguf"};
  v.push_back(mla);
  return v;
}

using CaseAndMethod = std::tuple<Case, std::string>;

// Every case with both drafters, but the MLA model, for which no draft of its vocabulary exists.
std::vector<CaseAndMethod> CasesAndMethods() {
  std::vector<CaseAndMethod> out;
  for (const Case& c : Cases())
    for (const char* m : {"ngram", "draft_model"})
      if (c.model.empty() || std::string(m) == "ngram") out.emplace_back(c, m);
  return out;
}

class SpeculativeGreedyTest : public ::testing::TestWithParam<CaseAndMethod> {};

TEST_P(SpeculativeGreedyTest, SameTokensAsWithoutDrafting) {
  const auto& [c, method] = GetParam();
  const testing::Prompts prompts = MixedPrompts();
  const Outcome plain = RunAll(ConfigFor(c, false, method), prompts, c.params);
  const Outcome spec = RunAll(ConfigFor(c, true, method), prompts, c.params);
  ASSERT_EQ(plain.tokens.size(), prompts.size());
  EXPECT_EQ(plain.tokens, spec.tokens);
  EXPECT_EQ(spec.stats.spec_method, method);
  if (c.expect_drafts) {
    EXPECT_GT(spec.stats.spec_draft_tokens, 0);
    // The 4-bit-KV draft of the same model agrees often; prompt lookup may find nothing right.
    if (method == "draft_model") {
      EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
    }
  } else {
    EXPECT_EQ(spec.stats.spec_draft_tokens, 0);
  }
  EXPECT_LE(spec.stats.spec_accepted_tokens, spec.stats.spec_draft_tokens);
  // Fewer steps than tokens when drafts were kept.
  EXPECT_LE(spec.stats.steps, plain.stats.steps);
}

INSTANTIATE_TEST_SUITE_P(Layouts, SpeculativeGreedyTest, ::testing::ValuesIn(CasesAndMethods()),
                         [](const auto& p) {
                           return std::get<0>(p.param).name + "_" + std::get<1>(p.param);
                         });

// Every sequence's K and V rows as attention decodes them, all layers.
std::vector<float> DecodedKv(const kvstore::PagedKvCache& c, int64_t seq) {
  std::vector<float> out;
  const auto& sc = c.store().config();
  const int64_t width = static_cast<int64_t>(sc.n_kv_head) * sc.head_dim;
  std::vector<float> row(static_cast<size_t>(width));
  for (int32_t l = 0; l < sc.n_layer; ++l)
    for (const kernels::KvPageView& v : {c.KeyView(l, seq), c.ValueView(l, seq)})
      for (int64_t p = 0; p < c.NumTokens(seq); ++p) {
        kernels::DecodeKvRow(v, p, row.data());
        out.insert(out.end(), row.begin(), row.end());
      }
  return out;
}

// Two engines step by step, one drafting: whenever both have computed the same tokens of a
// request, they hold the same number of KV slots for it and the rows decode to the same values,
// up to the last bit of rounding: a verify chunk's projections run as a many-token matmul, the
// plain engine's as one-token ones, and the two round differently now and then (the bit-exact
// rollback check per layout is kvstore's paged_kv_rollback_test). A rejected draft left behind
// would differ by far more (another token's K and V).
TEST(SpeculativeEngineTest, CacheMatchesAnEngineThatNeverDrafted) {
  for (const char* dtype : {"f32", "f16"}) {
    SCOPED_TRACE(dtype);
    Case c{dtype, {{"kv_cache_dtype", dtype}, {"enable_prefix_caching", "false"}}};
    auto plain = EngineCore::Create(ConfigFor(c, false, "ngram"));
    auto spec = EngineCore::Create(ConfigFor(c, true, "ngram"));
    ASSERT_TRUE(plain.ok() && spec.ok());
    const std::vector<int32_t> prompt = MixedPrompts().back();
    ASSERT_TRUE((*plain)->AddRequest(prompt, c.params, nullptr, 0, 1).ok());
    ASSERT_TRUE((*spec)->AddRequest(prompt, c.params, nullptr, 0, 1).ok());
    int compared = 0, exact = 0;
    while ((*spec)->HasWork()) {
      ASSERT_TRUE((*spec)->Step().ok());
      // A fresh engine's first request has sequence 1. The plain engine catches up to the same
      // number of computed tokens.
      const int64_t seq = 1;
      if (!(*spec)->cache().Contains(seq)) break;
      const int64_t n = (*spec)->cache().NumTokens(seq);
      while ((*plain)->HasWork() && (*plain)->cache().NumTokens(seq) < n)
        ASSERT_TRUE((*plain)->Step().ok());
      if ((*plain)->cache().NumTokens(seq) != n) continue;
      const std::vector<float> a = DecodedKv((*spec)->cache(), seq);
      const std::vector<float> b = DecodedKv((*plain)->cache(), seq);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_NEAR(a[i], b[i], 2e-3f * std::max(1.0f, std::fabs(b[i])))
            << "value " << i << " after " << n << " tokens";
      exact += a == b;
      ++compared;
    }
    EXPECT_GT((*spec)->Stats().spec_accepted_tokens, 0);
    EXPECT_GT(compared, 5);
    EXPECT_GT(exact, 0);
  }
}

// Sampling: the joint distribution of the 2nd and 3rd generated tokens (the first verified by
// speculation) with drafting equals the distribution without, by a two-sample chi-square test
// over 1500 seeded requests each. top_k 3 keeps the table small (at most 9 cells).
TEST(SpeculativeEngineTest, SampledTokensFollowTheTargetDistribution) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  p.top_p = 1.0f;
  p.min_p = 0;
  p.max_tokens = 3;
  p.ignore_eos = true;
  const std::vector<int32_t> prompt = testing::GoldenPrompts()[0];
  auto histogram = [&](bool speculate) {
    Case c{"sampled", {{"max_num_seqs", "64"}, {"enable_prefix_caching", "true"}}};
    auto core = EngineCore::Create(ConfigFor(c, speculate, "draft_model"));
    EXPECT_TRUE(core.ok());
    std::map<std::pair<int32_t, int32_t>, int> h;
    for (int i = 0; i < 1500; ++i) {
      SamplingParams q = p;
      q.seed = static_cast<uint64_t>(1000 + i) + (speculate ? 500000 : 0);
      EXPECT_TRUE((*core)
                      ->AddRequest(
                          prompt, q,
                          [&h](const RequestOutput& o) {
                            if (!o.finished) return;
                            const auto& t = o.outputs[0].token_ids;
                            if (t.size() == 3) h[{t[1], t[2]}]++;
                          },
                          0)
                      .ok());
    }
    while ((*core)->HasWork()) EXPECT_TRUE((*core)->Step().ok());
    if (speculate) {
      EXPECT_GT((*core)->Stats().spec_draft_tokens, 0);
      EXPECT_LT((*core)->Stats().spec_accepted_tokens, (*core)->Stats().spec_draft_tokens);
    }
    return h;
  };
  const auto a = histogram(false), b = histogram(true);
  std::map<std::pair<int32_t, int32_t>, std::pair<int, int>> cells;
  for (const auto& [k, n] : a) cells[k].first = n;
  for (const auto& [k, n] : b) cells[k].second = n;
  double total_a = 0, total_b = 0;
  for (const auto& [k, ab] : cells) {
    total_a += ab.first;
    total_b += ab.second;
  }
  ASSERT_EQ(total_a, 1500);
  ASSERT_EQ(total_b, 1500);
  double chi = 0;
  for (const auto& [k, ab] : cells) {
    const double row = ab.first + ab.second;
    const double ea = row * total_a / (total_a + total_b), eb = row * total_b / (total_a + total_b);
    chi += (ab.first - ea) * (ab.first - ea) / ea + (ab.second - eb) * (ab.second - eb) / eb;
  }
  // df = cells - 1 <= 8: P(chi2 > 31.8) = 1e-4 at df 8 (fixed seeds: deterministic).
  EXPECT_GE(cells.size(), 3u);
  EXPECT_LT(chi, 31.8) << "cells " << cells.size();
}

TEST(SpeculativeEngineTest, BadDraftModelsAreRefusedWithAMessage) {
  EngineConfig cfg;
  cfg.model = Stories();
  cfg.speculative_model = testing::SharedDir() + "/models/tiny-random-qwen2.gguf";
  auto core = EngineCore::Create(cfg);
  ASSERT_FALSE(core.ok());
  EXPECT_NE(core.error().message().find("vocabulary"), std::string::npos) << core.error().message();
  cfg.speculative_model = "/nonexistent/draft.gguf";
  EXPECT_FALSE(EngineCore::Create(cfg).ok());
  cfg.speculative_model.clear();
  cfg.speculative_method = SpeculativeMethod::kDraftModel;
  auto none = EngineCore::Create(cfg);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("speculative_model"), std::string::npos);
  cfg.speculative_method = SpeculativeMethod::kNgram;
  cfg.kivi_eager = true;
  EXPECT_FALSE(EngineCore::Create(cfg).ok());
}

}  // namespace
}  // namespace kvforge
