// Golden tests against llama.cpp's outputs in tests/data/reference: prompt ids, greedy ids (up
// to the first recorded near-tie), log-probabilities, and perplexity.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "kvforge/engine.h"
#include "support/reference_forward.h"
#include "support/test_paths.h"

namespace kvforge {
namespace {

nlohmann::json LoadJson(const std::string& rel) {
  return nlohmann::json::parse(
      kvforge::testing::ReadFileOrDie(kvforge::testing::SharedDir() + "/" + rel));
}

std::unique_ptr<Engine> MakeEngine(const std::string& model_rel, int32_t block_tokens = 16,
                                   bool f16 = true) {
  EngineConfig o;
  o.model = model_rel.empty() ? "" : kvforge::testing::SharedDir() + "/" + model_rel;
  o.block_size = block_tokens;
  o.kv_f16 = f16;
  o.max_model_len = 512;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.ok()) << e.error().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

SamplingParams Greedy(int n) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  return p;
}

class StoriesGolden : public ::testing::TestWithParam<std::tuple<int32_t, bool, bool>> {};

TEST_P(StoriesGolden, PromptIdsAndGreedyIdsMatchLlamaCpp) {
  const auto [block_tokens, f16, embedded] = GetParam();
  auto engine = MakeEngine(embedded ? "" : "models/stories260K.gguf", block_tokens, f16);
  ASSERT_NE(engine, nullptr);
  const auto ref = LoadJson("reference/stories260K-greedy.json");
  for (const auto& c : ref["cases"]) {
    const std::string prompt = c["prompt"];
    auto ids = engine->Tokenize(prompt, true, false);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, c["prompt_ids"].get<std::vector<int32_t>>()) << prompt;
    auto r = engine->Generate(*ids, Greedy(c["n_predict"]));
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    const auto want = c["gen_ids"].get<std::vector<int32_t>>();
    size_t check = want.size();
    if (!c["first_step_with_margin_below_1e-2"].is_null())
      check = c["first_step_with_margin_below_1e-2"].get<size_t>();
    ASSERT_GE(r->tokens.size(), check) << prompt;
    EXPECT_EQ(std::vector<int32_t>(r->tokens.begin(), r->tokens.begin() + static_cast<long>(check)),
              std::vector<int32_t>(want.begin(), want.begin() + static_cast<long>(check)))
        << prompt;
    if (check == want.size()) {
      EXPECT_EQ(r->text, c["gen_text"].get<std::string>()) << prompt;
    }
  }
}

// Paged KV with block sizes 1, 16 and 32, f16 and f32 KV, file and embedded model.
INSTANTIATE_TEST_SUITE_P(Configs, StoriesGolden,
                         ::testing::Values(std::make_tuple(16, true, true),
                                           std::make_tuple(1, true, false),
                                           std::make_tuple(32, true, false),
                                           std::make_tuple(16, false, false),
                                           std::make_tuple(512, true, false)));

// llama.cpp rounds activations to f16 before F16 matmuls and the attention's Q and softmax
// weights to f16 (ggml's vec_dot_f16), so its reference log-probabilities are themselves off the
// exact (float64) values by up to ~2e-2 on this model (its output logits are large). The test
// therefore checks: ids equal llama.cpp's; with an f32 KV cache our log-probabilities equal the
// float64 oracle's within 1e-4 and llama.cpp's within 3e-2 (as with the default f16 KV cache).

TEST(Qwen2Golden, GreedyIdsAndLogprobsMatchLlamaCppAndTheOracle) {
  const auto ref = LoadJson("reference/tiny-random-qwen2-greedy.json");
  auto oracle = kvforge::testing::ReferenceModel::Load(kvforge::testing::SharedDir() +
                                                       "/models/tiny-random-qwen2.gguf");
  ASSERT_TRUE(oracle.ok()) << oracle.error().ToString();
  const double exact_tolerance = 1e-4;  // the output projection keeps f32 activations
  for (bool f16 : {false, true}) {
    auto engine = MakeEngine("models/tiny-random-qwen2.gguf", 16, f16);
    ASSERT_NE(engine, nullptr);
    for (const auto& c : ref["cases"]) {
      const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      const auto want = c["gen_ids"].get<std::vector<int32_t>>();
      SamplingParams p = Greedy(static_cast<int>(want.size()));
      p.ignore_eos = true;
      p.logprobs = 1;
      auto r = engine->Generate(prompt, p);
      ASSERT_TRUE(r.ok()) << r.error().ToString();
      size_t check = want.size();
      if (!c["first_step_with_margin_below_1e-2"].is_null())
        check = c["first_step_with_margin_below_1e-2"].get<size_t>();
      ASSERT_GE(r->tokens.size(), check);
      std::vector<std::vector<double>> exact;
      if (!f16) {
        std::vector<int32_t> all = prompt;
        all.insert(all.end(), want.begin(), want.begin() + static_cast<long>(check));
        exact = (*oracle)->Logits(all);
      }
      for (size_t i = 0; i < check; ++i) {
        ASSERT_EQ(r->tokens[i], want[i]) << c["prompt"] << " step " << i;
        const double want_lp = c["steps"][i]["top_logprobs"][0][1];
        EXPECT_NEAR(r->logprobs[i], want_lp, 3e-2) << c["prompt"] << " step " << i;
        if (!f16) {
          const auto& row = exact[prompt.size() - 1 + i];
          double mx = -1e300, sum = 0;
          for (double v : row) mx = std::max(mx, v);
          for (double v : row) sum += std::exp(v - mx);
          EXPECT_NEAR(r->logprobs[i], row[static_cast<size_t>(want[i])] - mx - std::log(sum),
                      exact_tolerance)
              << c["prompt"] << " step " << i;
        }
      }
      // The full top-5 at the first step.
      auto logits = engine->LogitsFor(prompt);
      ASSERT_TRUE(logits.ok());
      double mx = -1e30, sum = 0;
      for (float v : *logits) mx = std::max(mx, static_cast<double>(v));
      for (float v : *logits) sum += std::exp(v - mx);
      for (const auto& pair : c["steps"][0]["top_logprobs"]) {
        const int id = pair[0];
        const double lp = (*logits)[static_cast<size_t>(id)] - mx - std::log(sum);
        EXPECT_NEAR(lp, pair[1].get<double>(), 3e-2) << c["prompt"] << " id " << id;
      }
    }
  }
}

TEST(Llama2TinyRandom, LoadsAndGenerates) {
  auto engine = MakeEngine("models/llama-2-tiny-random.gguf");
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->info().n_vocab, 32000);
  auto ids = engine->Tokenize("Hello world", true, false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), 1);
  auto r = engine->Generate(*ids, Greedy(8));
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->tokens.size(), 0u);
}

// llama-perplexity (b10573) on the same text: 3.9403 at -c 128 --chunks 100, 3.8662 at -c 512
// --chunks 50. kvforge must agree within 0.2%.
TEST(Perplexity, MatchesLlamaPerplexity) {
  auto engine = MakeEngine("");
  ASSERT_NE(engine, nullptr);
  const std::string text = kvforge::testing::ReadFileOrDie(kvforge::testing::SharedDir() +
                                                           "/models/tinystories-val-head.txt");
  for (auto [ctx, chunks, want] :
       {std::make_tuple(128, 100, 3.9403), std::make_tuple(512, 50, 3.8662)}) {
    PerplexityOptions o;
    o.ctx = ctx;
    o.max_chunks = chunks;
    auto r = engine->Perplexity(text, o);
    ASSERT_TRUE(r.ok()) << r.error().ToString();
    EXPECT_NEAR(r->ppl, want, want * 0.002) << "ctx " << ctx;
    EXPECT_EQ(r->chunks, chunks);
    EXPECT_EQ(r->tokens_scored, chunks * (ctx / 2 - 1));
    EXPECT_GT(r->stderr_ppl, 0);
  }
}

}  // namespace
}  // namespace kvforge
