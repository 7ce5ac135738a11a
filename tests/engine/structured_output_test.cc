// Structured outputs end to end on the TinyStories model: every constrained output is a
// sentence of its grammar, across sampling, n > 1, beam search, quantized and evicted KV,
// preemption and batches mixed with free requests; logit_bias; bad constraints refused.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "kvforge/config_names.h"
#include "kvforge/engine.h"
#include "kvforge/llm.h"

namespace kvforge {
namespace {

EngineConfig Base() {
  EngineConfig c;
  c.max_model_len = 512;
  c.threads = 2;
  return c;
}

SamplingParams Sampled(uint64_t seed, int max_tokens = 48) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  p.max_tokens = max_tokens;
  return p;
}

const char* kRegex = "(Tom|Lily) (is|was) [a-z]{2,8}\\.";

std::vector<RequestOutput> MustGenerate(LLM& llm, const std::vector<std::string>& prompts,
                                        const SamplingParams& p) {
  auto outs = llm.generate(prompts, p);
  EXPECT_TRUE(outs.ok()) << outs.status().ToString();
  return outs.ok() ? *outs : std::vector<RequestOutput>{};
}

// The first completion of one prompt; an empty one (and a failure) when there is none.
CompletionOutput FirstOutput(LLM& llm, const std::string& prompt, const SamplingParams& p) {
  const std::vector<RequestOutput> outs = MustGenerate(llm, {prompt}, p);
  const bool has = !outs.empty() && !outs[0].outputs.empty();
  EXPECT_TRUE(has) << "no output for '" << prompt << "'";
  return has ? outs[0].outputs[0] : CompletionOutput{};
}

TEST(StructuredOutput, RegexOutputsMatchAcrossSeedsAndN) {
  LLM llm(Base());
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  const std::regex re(kRegex);
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SamplingParams p = Sampled(seed);
    p.n = seed % 2 ? 3 : 1;
    p.structured_outputs.regex = kRegex;
    auto outs = MustGenerate(llm, {"Once upon a time", "One day"}, p);
    for (const RequestOutput& o : outs) {
      ASSERT_EQ(o.outputs.size(), static_cast<size_t>(p.n));
      for (const CompletionOutput& c : o.outputs) {
        EXPECT_TRUE(std::regex_match(c.text, re)) << "seed " << seed << ": '" << c.text << "'";
        EXPECT_EQ(c.finish_reason, "stop") << c.text;
      }
    }
  }
}

TEST(StructuredOutput, ChoiceAndGreedyAndBeamSearch) {
  LLM llm(Base());
  ASSERT_TRUE(llm.ok());
  const std::vector<std::string> choices = {"happy", "sad", "a big red ball"};
  SamplingParams greedy = Sampled(1);
  greedy.temperature = 0;
  greedy.structured_outputs.choice = choices;
  SamplingParams beams = greedy;
  beams.beam_width = 3;
  beams.n = 3;
  for (const SamplingParams& p : {greedy, beams}) {
    for (const RequestOutput& o : MustGenerate(llm, {"The cat was", "Lily saw"}, p)) {
      ASSERT_EQ(o.outputs.size(), static_cast<size_t>(p.n));
      for (const CompletionOutput& c : o.outputs)
        EXPECT_NE(std::find(choices.begin(), choices.end(), c.text), choices.end())
            << "'" << c.text << "' (beam width " << p.beam_width << ")";
    }
  }
}

TEST(StructuredOutput, JsonSchemaOutputsParseAndHaveTheirFields) {
  LLM llm(Base());
  ASSERT_TRUE(llm.ok());
  const std::string schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 1,
      "maximum": 99}, "mood": {"enum": ["happy", "sad"]}}, "required": ["name", "age", "mood"]})";
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SamplingParams p = Sampled(seed, 96);
    p.structured_outputs.json = schema;
    for (const RequestOutput& o : MustGenerate(llm, {"Once upon a time"}, p)) {
      const std::string& text = o.outputs[0].text;
      if (o.outputs[0].finish_reason != "stop") continue;  // cut by max_tokens inside a string
      auto j = nlohmann::json::parse(text, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << text;
      EXPECT_TRUE(j["name"].is_string()) << text;
      EXPECT_GE(j["age"].get<int>(), 1) << text;
      EXPECT_LE(j["age"].get<int>(), 99) << text;
      EXPECT_TRUE(j["mood"] == "happy" || j["mood"] == "sad") << text;
    }
  }
}

TEST(StructuredOutput, HoldsAcrossKvDtypesPoliciesAndPreemption) {
  struct Variant {
    const char* what;
    EngineConfig cfg;
  };
  std::vector<Variant> variants;
  for (const char* dtype : {"q8_0", "kivi2", "fp8"}) {
    EngineConfig c = Base();
    auto parsed = ParseKvCacheDtype(dtype);
    ASSERT_TRUE(parsed.ok()) << dtype;
    c.kv_cache_dtype = *parsed;
    variants.push_back({dtype, c});
  }
  {
    EngineConfig c = Base();
    c.kv_policy.kind = KvPolicyKind::kH2O;
    c.kv_policy.budget = 24;
    variants.push_back({"h2o", c});
  }
  {
    // A pool of a few blocks: requests are preempted (recompute) and resumed.
    EngineConfig c = Base();
    c.block_size = 16;
    c.kv_cache_memory_bytes = 64 * 1024;
    variants.push_back({"preempted", c});
  }
  const std::regex re(kRegex);
  for (const Variant& v : variants) {
    LLM llm(v.cfg);
    ASSERT_TRUE(llm.ok()) << v.what << ": " << llm.status().ToString();
    SamplingParams p = Sampled(7);
    p.structured_outputs.regex = kRegex;
    auto outs = MustGenerate(llm, {"Once upon a time", "One day", "Tom had", "Lily went"}, p);
    ASSERT_EQ(outs.size(), 4u) << v.what;
    for (const RequestOutput& o : outs)
      EXPECT_TRUE(std::regex_match(o.outputs[0].text, re)) << v.what << ": " << o.outputs[0].text;
  }
}

TEST(StructuredOutput, FreeRequestsInAMixedBatchAreUnchanged) {
  SamplingParams free = Sampled(1, 32);
  free.temperature = 0;
  SamplingParams constrained = Sampled(2, 32);
  constrained.structured_outputs.regex = kRegex;
  std::vector<int32_t> alone;
  {
    LLM llm(Base());
    ASSERT_TRUE(llm.ok());
    alone = FirstOutput(llm, "Once upon a time", free).token_ids;
  }
  auto engine = AsyncEngine::Create(Base());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  std::mutex mu;
  std::condition_variable cv;
  std::map<size_t, RequestOutput> done;
  std::vector<OutputCallback> cbs;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplingParams> params;
  for (size_t i = 0; i < 4; ++i) {
    auto ids = (*engine)->Tokenize("Once upon a time", true, false);
    ASSERT_TRUE(ids.ok());
    prompts.push_back(*ids);
    params.push_back(i % 2 ? constrained : free);
    cbs.push_back([&, i](const RequestOutput& o) {
      if (!o.finished) return;
      std::lock_guard<std::mutex> lock(mu);
      done[i] = o;
      cv.notify_all();
    });
  }
  ASSERT_TRUE((*engine)->SubmitBatch(prompts, params, cbs).ok());
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done.size() == 4; }))
      << "requests did not finish within 60 s";
  for (size_t i = 0; i < 4; ++i) {
    if (i % 2) {
      EXPECT_TRUE(std::regex_match(done[i].outputs[0].text, std::regex(kRegex)))
          << done[i].outputs[0].text;
    } else {
      EXPECT_EQ(done[i].outputs[0].token_ids, alone) << "free request " << i;
    }
  }
}

TEST(StructuredOutput, LogitBiasBansAndFavoursTokens) {
  LLM llm(Base());
  ASSERT_TRUE(llm.ok());
  SamplingParams p = Sampled(1, 24);
  p.temperature = 0;
  const auto plain = MustGenerate(llm, {"Once upon a time"}, p);
  ASSERT_FALSE(plain.empty());
  const int32_t first = plain[0].outputs[0].token_ids[0];
  p.logit_bias = {{first, -100.0f}};
  const auto banned = MustGenerate(llm, {"Once upon a time"}, p);
  for (int32_t t : banned[0].outputs[0].token_ids) EXPECT_NE(t, first);
  p.logit_bias = {{300, 100.0f}};
  const auto favoured = MustGenerate(llm, {"Once upon a time"}, p);
  for (int32_t t : favoured[0].outputs[0].token_ids) EXPECT_EQ(t, 300);
  p.logit_bias = {{100000, 1.0f}};
  EXPECT_FALSE(llm.generate({"x"}, p).ok());
  p.logit_bias = {{1, 101.0f}};
  EXPECT_FALSE(llm.generate({"x"}, p).ok());
}

TEST(StructuredOutput, BadConstraintsAreRefusedWithTheirPosition) {
  LLM llm(Base());
  ASSERT_TRUE(llm.ok());
  SamplingParams p = Sampled(1);
  p.structured_outputs.grammar = "root ::= \"a\" missing";
  auto r = llm.generate({"x"}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'missing' is used but not defined"), std::string::npos)
      << r.status().ToString();
  p.structured_outputs = {};
  p.structured_outputs.json = R"({"type": "object", "properties": {"a": {"multipleOf": 3}}})";
  r = llm.generate({"x"}, p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("multipleOf"), std::string::npos) << r.status().ToString();
  p.structured_outputs = {};
  p.structured_outputs.regex = "a(?=b)";
  EXPECT_FALSE(llm.generate({"x"}, p).ok());
  p.structured_outputs.grammar = "root ::= \"a\"";
  EXPECT_FALSE(llm.generate({"x"}, p).ok());  // two forms at once
}

TEST(StructuredOutput, SingleRequestEngineHonoursTheGrammar) {
  EngineConfig c = Base();
  auto engine = Engine::Create(c);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  SamplingParams p = Sampled(3);
  p.structured_outputs.regex = kRegex;
  auto tokens = (*engine)->Tokenize("Once upon a time", true, false);
  ASSERT_TRUE(tokens.ok());
  auto r = (*engine)->Generate(*tokens, p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(std::regex_match(r->text, std::regex(kRegex))) << r->text;
  EXPECT_EQ(r->finish, FinishReason::kStop);
}

// The reasoning gate: the output is free until the end marker (here ".", which the model writes
// on its own), then a sentence of the grammar; greedy, the free part is the unconstrained text.
TEST(StructuredOutput, GrammarAppliesAfterTheReasoningEnds) {
  LLM llm(Base());
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  SamplingParams free_p = Sampled(1, 40);
  free_p.temperature = 0;
  const std::string free_text = FirstOutput(llm, "Once upon a time", free_p).text;
  const size_t dot = free_text.find('.');
  ASSERT_NE(dot, std::string::npos) << free_text;
  const std::regex after(" ?(yes|no)");
  SamplingParams p = free_p;
  p.max_tokens = 80;
  p.structured_outputs.regex = " ?(yes|no)";
  p.structured_outputs.reasoning_end = ".";
  const std::string greedy = FirstOutput(llm, "Once upon a time", p).text;
  ASSERT_GT(greedy.size(), dot) << greedy;
  EXPECT_EQ(greedy.substr(0, dot + 1), free_text.substr(0, dot + 1));
  EXPECT_TRUE(std::regex_match(greedy.substr(dot + 1), after)) << greedy;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SamplingParams q = Sampled(seed, 120);
    q.n = 2;
    q.structured_outputs = p.structured_outputs;
    const std::vector<RequestOutput> outs = MustGenerate(llm, {"One day"}, q);
    ASSERT_EQ(outs.size(), 1u);
    for (const CompletionOutput& c : outs[0].outputs) {
      if (c.finish_reason == "length") continue;  // the reasoning ran to max_tokens
      const size_t at = c.text.find('.');
      ASSERT_NE(at, std::string::npos) << c.text;
      EXPECT_TRUE(std::regex_match(c.text.substr(at + 1), after)) << c.text;
      EXPECT_EQ(c.finish_reason, "stop");
    }
  }
  // A reply that does not open its reasoning with reasoning_start is constrained from the start.
  p.structured_outputs.reasoning_start = "<think>";
  const std::string skipped = FirstOutput(llm, "Once upon a time", p).text;
  EXPECT_TRUE(std::regex_match(skipped, after)) << skipped;
  // The single-request engine gates the same way.
  auto engine = Engine::Create(Base());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  p.structured_outputs.reasoning_start.clear();
  auto tokens = (*engine)->Tokenize("Once upon a time", true, false);
  ASSERT_TRUE(tokens.ok());
  auto r = (*engine)->Generate(*tokens, p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->text, greedy);
}

TEST(StructuredOutput, SkipSpecialTokensFalseKeepsControlTokenText) {
  LLM llm(Base());
  ASSERT_TRUE(llm.ok()) << llm.status().ToString();
  SamplingParams p = Sampled(1, 4);
  p.temperature = 0;
  p.ignore_eos = true;
  const int32_t bos = 1;  // <s>: a control token of the TinyStories vocabulary
  p.logit_bias = {{bos, 100}};
  const CompletionOutput hidden = FirstOutput(llm, "Once", p);
  ASSERT_EQ(hidden.token_ids, std::vector<int32_t>(4, bos));
  EXPECT_EQ(hidden.text, "");
  p.skip_special_tokens = false;
  EXPECT_EQ(FirstOutput(llm, "Once", p).text, "<s><s><s><s>");
}

}  // namespace
}  // namespace kvforge
