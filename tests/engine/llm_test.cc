// The continuous-batching engine end to end on the TinyStories model: batch-, chunking-,
// preemption- and batching-mode-invariance of greedy outputs (against llama.cpp's goldens),
// parallel sampling and beam search on shared blocks, the async API, aborts and bad requests.
#include "kvforge/llm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/llm_internal.h"
#include "kvforge/config_names.h"
#include "support/test_paths.h"

namespace kvforge {
namespace {

struct Golden {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<int32_t>> gen;  // checked prefix (up to the first near-tie)
};

Golden LoadGolden() {
  const auto j = nlohmann::json::parse(kvforge::testing::ReadFileOrDie(
      kvforge::testing::SharedDir() + "/reference/stories260K-greedy.json"));
  Golden g;
  for (const auto& c : j["cases"]) {
    g.prompts.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
    auto ids = c["gen_ids"].get<std::vector<int32_t>>();
    if (!c["first_step_with_margin_below_1e-2"].is_null())
      ids.resize(c["first_step_with_margin_below_1e-2"].get<size_t>());
    g.gen.push_back(ids);
  }
  return g;
}

using Prompts = std::vector<std::vector<int32_t>>;

SamplingParams Greedy(int n = 64) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  return p;
}

void ExpectGolden(const std::vector<RequestOutput>& outs, const Golden& g,
                  const std::string& what) {
  ASSERT_EQ(outs.size(), g.prompts.size()) << what;
  for (size_t i = 0; i < outs.size(); ++i) {
    ASSERT_TRUE(outs[i].finished) << what;
    ASSERT_EQ(outs[i].outputs.size(), 1u) << what;
    const auto& ids = outs[i].outputs[0].token_ids;
    ASSERT_GE(ids.size(), g.gen[i].size()) << what << " prompt " << i;
    EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<long>(g.gen[i].size())),
              g.gen[i])
        << what << " prompt " << i;
  }
}

EngineConfig Base() {
  EngineConfig c;
  c.max_model_len = 512;
  c.threads = 2;
  return c;
}

TEST(LLMTest, BatchedGreedyMatchesLlamaCppGoldens) {
  const Golden g = LoadGolden();
  LLM llm(Base());
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  auto outs = llm.generate(g.prompts, Greedy());
  ASSERT_TRUE(outs.ok()) << outs.error().ToString();
  ExpectGolden(*outs, g, "continuous");
  EXPECT_EQ(llm.stats().kv_usage, 0.0);  // every block returned
}

TEST(LLMTest, InvariantUnderChunkingPreemptionAndBatchingMode) {
  const Golden g = LoadGolden();
  struct Variant {
    std::string name;
    EngineConfig cfg;
  };
  std::vector<Variant> variants;
  EngineConfig c = Base();
  c.max_num_batched_tokens = 7;  // prompts split into chunks of <= 7 tokens
  variants.push_back({"chunked prefill", c});
  c = Base();
  c.long_prefill_token_threshold = 5;  // each prefill chunk <= 5 tokens, budget untouched
  variants.push_back({"long prefill threshold", c});
  c = Base();
  c.kv_cache_memory_bytes = 640 * 16 * 12;  // 12 blocks: 6 sequences of ~84 tokens cannot all fit
  variants.push_back({"preemption by recompute", c});
  c.preemption_mode = PreemptionMode::kSwap;
  variants.push_back({"preemption by swap", c});
  c = Base();
  c.batching = BatchingMode::kStatic;
  variants.push_back({"static batching", c});
  c = Base();
  c.contiguous_kv = true;
  c.kv_cache_memory_bytes = 640ull * 512 * 8;
  variants.push_back({"contiguous reservation", c});
  c = Base();
  c.block_size = 1;
  c.max_num_seqs = 2;
  variants.push_back({"block size 1, two seqs at a time", c});

  for (const auto& v : variants) {
    LLM llm(v.cfg);
    ASSERT_TRUE(llm.ok()) << v.name << ": " << llm.status().ToString();
    auto outs = llm.generate(g.prompts, Greedy());
    ASSERT_TRUE(outs.ok()) << v.name << ": " << outs.error().ToString();
    ExpectGolden(*outs, g, v.name);
    if (v.name.rfind("preemption", 0) == 0) {
      int64_t pre = 0;
      for (const auto& o : *outs) pre += o.metrics.num_preemptions;
      EXPECT_GT(pre, 0) << v.name << ": the budget should have forced preemptions";
    }
    EXPECT_EQ(llm.stats().kv_usage, 0.0) << v.name;
  }
}

// Decode-priority chunking changes how prompts are split, never what is generated. The golden
// prompts three times over, two at a time, with output lengths that differ so that prompts are
// admitted beside running decodes; the step-cost model sees the steps it needs before it may
// cut, and a 1 us target then cuts every such prefill to the 3-token floor.
TEST(LLMTest, DecodePriorityChunkingKeepsGreedyOutputs) {
  const Golden g = LoadGolden();
  EngineConfig c = Base();
  c.enable_prefix_caching = false;  // repeated prompts would otherwise skip their prefill
  c.max_num_seqs = 2;
  c.max_itl_ms = 1e-3;
  c.min_prefill_chunk = 3;
  LLM llm(c);
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  EngineCore* core = engine::CoreOf(llm);
  std::map<size_t, std::vector<int32_t>> got;  // request index -> generated ids
  for (size_t i = 0; i < 3 * g.prompts.size(); ++i) {
    SamplingParams sp = Greedy(64 + static_cast<int>(i % 4) * 9);
    auto id = core->AddRequest(
        g.prompts[i % g.prompts.size()], sp,
        [&got, i](const RequestOutput& out) {
          if (out.finished) got[i] = out.outputs.at(0).token_ids;
        },
        0);
    ASSERT_TRUE(id.ok()) << id.error().ToString();
  }
  for (int steps = 0; core->HasWork(); ++steps) {
    ASSERT_LT(steps, 10000) << "the engine did not finish";
    ASSERT_TRUE(core->Step().ok());
  }
  ASSERT_EQ(got.size(), 3 * g.prompts.size());
  for (const auto& [i, ids] : got) {
    const auto& want = g.gen[i % g.prompts.size()];
    ASSERT_GE(ids.size(), want.size()) << "request " << i;
    EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<long>(want.size())), want)
        << "request " << i;
  }
  EXPECT_GT(llm.stats().itl_limited_steps, 0) << "the ITL target never cut a prefill";
  EXPECT_EQ(llm.stats().kv_usage, 0.0);
}

TEST(LLMTest, ParallelSamplingSharesThePromptBlocks) {
  EngineConfig c = Base();
  c.block_size = 4;
  LLM llm(c);
  ASSERT_TRUE(llm.ok());
  const Golden g = LoadGolden();
  SamplingParams p = Greedy(40);
  p.n = 3;
  auto outs = llm.generate(Prompts{g.prompts[5]}, p);  // the 20-token prompt
  ASSERT_TRUE(outs.ok()) << outs.error().ToString();
  ASSERT_EQ((*outs)[0].outputs.size(), 3u);
  for (const auto& o : (*outs)[0].outputs) {  // greedy: all three equal the golden
    ASSERT_EQ(o.token_ids.size(), 40u);
    EXPECT_EQ(o.token_ids, std::vector<int32_t>(g.gen[5].begin(), g.gen[5].begin() + 40));
  }
  EXPECT_GT(engine::CoreOf(llm)->MeanSharingSaving(), 0.2);
  // Sampled: seeded and reproducible, and the completions differ from each other.
  p.temperature = 1.0f;
  p.seed = 11;
  auto a = llm.generate(Prompts{g.prompts[0]}, p);
  auto b = llm.generate(Prompts{g.prompts[0]}, p);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t k = 0; k < 3; ++k)
    EXPECT_EQ((*a)[0].outputs[k].token_ids, (*b)[0].outputs[k].token_ids);
  EXPECT_NE((*a)[0].outputs[0].token_ids, (*a)[0].outputs[1].token_ids);
  EXPECT_EQ(llm.stats().kv_usage, 0.0);
}

TEST(LLMTest, BeamSearchFindsAtLeastTheGreedyLikelihood) {
  LLM llm(Base());
  ASSERT_TRUE(llm.ok());
  const Golden g = LoadGolden();
  for (size_t i : {size_t{0}, size_t{3}}) {
    SamplingParams greedy = Greedy(24);
    greedy.ignore_eos = true;
    greedy.logprobs = 1;
    auto go = llm.generate(Prompts{g.prompts[i]}, greedy);
    ASSERT_TRUE(go.ok());
    double greedy_lp = 0;
    for (float v : (*go)[0].outputs[0].token_logprobs) greedy_lp += v;
    SamplingParams beam = Greedy(24);
    beam.ignore_eos = true;
    beam.beam_width = 4;
    beam.n = 2;
    beam.length_penalty = 0;  // rank by raw cumulative log-probability
    auto bo = llm.generate(Prompts{g.prompts[i]}, beam);
    ASSERT_TRUE(bo.ok()) << bo.error().ToString();
    ASSERT_EQ((*bo)[0].outputs.size(), 2u);
    EXPECT_EQ((*bo)[0].outputs[0].token_ids.size(), 24u);
    EXPECT_GE((*bo)[0].outputs[0].cumulative_logprob, greedy_lp - 1e-3);
    EXPECT_GE((*bo)[0].outputs[0].cumulative_logprob, (*bo)[0].outputs[1].cumulative_logprob);
    EXPECT_FALSE((*bo)[0].outputs[0].text.empty());
  }
  EXPECT_EQ(llm.stats().kv_usage, 0.0);
}

TEST(LLMTest, StreamingDeltasConcatenateToTheFinalText) {
  LLM llm(Base());
  ASSERT_TRUE(llm.ok());
  SamplingParams p = Greedy(48);
  p.stop = {"Lily"};
  std::string streamed;
  auto outs =
      llm.generate(std::vector<std::string>{"Once upon a time"}, p, [&](const RequestOutput& o) {
        for (const auto& d : o.delta_text) streamed += d;
      });
  ASSERT_TRUE(outs.ok());
  EXPECT_EQ((*outs)[0].outputs[0].finish_reason, "stop");
  EXPECT_EQ((*outs)[0].outputs[0].text, ", there was a little girl named ");
  EXPECT_EQ(streamed, (*outs)[0].outputs[0].text);
  EXPECT_GT((*outs)[0].metrics.ttft_ms, 0);
}

TEST(LLMTest, InvalidRequestsAreRejectedBeforeScheduling) {
  LLM llm(Base());
  ASSERT_TRUE(llm.ok());
  SamplingParams p = Greedy(8);
  p.top_p = 2;
  EXPECT_EQ(llm.generate(Prompts{{1, 403}}, p).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(llm.generate(Prompts{{1, 403}}, Greedy(600)).error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(llm.generate(Prompts{{}}, Greedy(8)).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(llm.generate(Prompts{{1, 99999}}, Greedy(8)).error().code(),
            StatusCode::kInvalidArgument);
  EngineConfig small = Base();
  small.kv_cache_memory_bytes = 640 * 16 * 2;  // 2 blocks = 32 tokens
  LLM tiny(small);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny.generate(Prompts{{1, 403, 407}}, Greedy(100)).error().code(),
            StatusCode::kResourceExhausted);
  EngineConfig bad = Base();
  bad.max_num_seqs = 0;
  EXPECT_FALSE(LLM(bad).ok());
  const Status sometimes = SetConfigField(&bad, "batching", "sometimes");
  EXPECT_EQ(sometimes.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(sometimes.message().find("continuous, static"), std::string::npos)
      << sometimes.message();
}

TEST(AsyncEngineTest, ConcurrentClientsGetTheSequentialOutputs) {
  const Golden g = LoadGolden();
  auto engine = AsyncEngine::Create(Base());
  ASSERT_TRUE(engine.ok());
  std::mutex mu;
  std::condition_variable cv;
  std::map<int64_t, RequestOutput> done;
  std::vector<std::thread> clients;
  std::vector<std::pair<int64_t, size_t>> ids;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < g.prompts.size() * 2; i += 4) {
        auto id = (*engine)->Submit(g.prompts[i % g.prompts.size()], Greedy(),
                                    [&](const RequestOutput& o) {
                                      if (!o.finished) return;
                                      std::lock_guard<std::mutex> lock(mu);
                                      done[o.request_id] = o;
                                      cv.notify_all();
                                    });
        ASSERT_TRUE(id.ok());
        std::lock_guard<std::mutex> lock(mu);
        ids.emplace_back(*id, i % g.prompts.size());
      }
    });
  }
  for (auto& c : clients) c.join();
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done.size() == g.prompts.size() * 2; });
  for (const auto& [id, idx] : ids) {
    const auto& ids_out = done[id].outputs[0].token_ids;
    ASSERT_GE(ids_out.size(), g.gen[idx].size());
    EXPECT_EQ(std::vector<int32_t>(ids_out.begin(),
                                   ids_out.begin() + static_cast<long>(g.gen[idx].size())),
              g.gen[idx]);
  }
}

TEST(AsyncEngineTest, CurrentStatsCountWhatTheCallbacksDelivered) {
  // A final output is delivered inside the engine's step; CurrentStats answers once that step
  // has ended, so the request it finished is counted (Stats may still show it running). An idle
  // engine wakes to answer.
  auto engine = AsyncEngine::Create(Base());
  ASSERT_TRUE(engine.ok());
  for (int round = 1; round <= 3; ++round) {
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
    auto id = (*engine)->Submit({1, 403, 407, 261, 378}, Greedy(4), [&](const RequestOutput& o) {
      if (!o.finished) return;
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
      cv.notify_all();
    });
    ASSERT_TRUE(id.ok());
    {
      std::unique_lock<std::mutex> lock(mu);
      ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return finished; }))
          << "the request did not finish";
    }
    Result<EngineStats> s = (*engine)->CurrentStats();
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    EXPECT_EQ(s->num_running, 0);
    EXPECT_EQ(s->num_waiting, 0);
    EXPECT_EQ(s->prefix_cache_queries, round);
  }
}

TEST(AsyncEngineTest, AbortFreesTheBlocks) {
  EngineConfig c = Base();
  auto engine = AsyncEngine::Create(c);
  ASSERT_TRUE(engine.ok());
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::string reason;
  int chunks = 0;  // guarded by mu
  SamplingParams p = Greedy(400);
  p.ignore_eos = true;
  auto id = (*engine)->Submit({1, 403, 407, 261, 378}, p, [&](const RequestOutput& o) {
    std::lock_guard<std::mutex> lock(mu);
    ++chunks;
    if (o.finished) {
      finished = true;
      reason = o.outputs[0].finish_reason;
    }
    cv.notify_all();
  });
  ASSERT_TRUE(id.ok());
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return chunks >= 3 || finished; }))
      << "the request produced no output within 60 s";
  ASSERT_FALSE(finished) << "400 tokens finished before the abort: " << reason;
  lock.unlock();
  (*engine)->Abort(*id);
  lock.lock();
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return finished; }))
      << "no final output within 60 s of the abort";
  EXPECT_EQ(reason, "abort");
  lock.unlock();
  // Stats are refreshed after the engine thread's next iteration.
  for (int i = 0; i < 1000 && (*engine)->Stats().kv_usage != 0.0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ((*engine)->Stats().kv_usage, 0.0);
  EXPECT_EQ((*engine)->Stats().num_running, 0);
}

}  // namespace
}  // namespace kvforge

namespace kvforge {
namespace {

// The API shape users know from vLLM compiles and works as written in the README.
TEST(LLMTest, ReadmeShapedApi) {
  kvforge::LLM llm({.model = "",
                    .max_model_len = 512,
                    .kv_cache_memory_bytes = 64ull << 20,
                    .max_num_batched_tokens = 256,
                    .max_num_seqs = 8});
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  std::vector<std::string> prompts = {"Once upon a time", "The little dog"};
  auto outputs =
      llm.generate(prompts, kvforge::SamplingParams{.temperature = 0.8f, .max_tokens = 16});
  ASSERT_TRUE(outputs.ok());
  ASSERT_EQ(outputs->size(), 2u);
  for (const auto& o : *outputs) {
    EXPECT_TRUE(o.finished);
    EXPECT_FALSE(o.outputs[0].token_ids.empty());
    EXPECT_GE(o.metrics.e2e_ms, o.metrics.ttft_ms);
  }
}

}  // namespace
}  // namespace kvforge
