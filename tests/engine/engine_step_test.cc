// EngineCore::Step's stages (engine_step.cc): an error after any stage before the commit leaves
// the engine as it was. For each stage and several kinds of requests (greedy, seeded sampling
// with n > 1, beam search, a KV eviction policy that observes attention, a regex constraint, a
// quantized cache), a run in which one step fails there gives the same outputs as a run without
// the failure, and the failed step changed no statistic and emitted nothing.
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "kvforge/config_names.h"
#include "support/story_prompts.h"

namespace kvforge {
namespace {

using Stage = EngineCore::StepStage;

struct Case {
  std::string name;
  SamplingParams params;
  std::string kv_cache_dtype = "auto";
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> Cases() {
  std::vector<Case> cases;
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 12;
  greedy.logprobs = 2;
  cases.push_back({"greedy", greedy});
  SamplingParams sampled;
  sampled.temperature = 0.9f;
  sampled.seed = 7;
  sampled.n = 3;
  sampled.max_tokens = 10;
  cases.push_back({"sampled_n3", sampled});
  SamplingParams beams = greedy;
  beams.logprobs = 0;
  beams.beam_width = 3;
  beams.n = 2;
  cases.push_back({"beam3", beams});
  SamplingParams h2o = greedy;
  h2o.kv_policy = KvPolicy{};
  h2o.kv_policy->kind = KvPolicyKind::kH2O;
  h2o.kv_policy->budget = 10;
  h2o.kv_policy->window = 2;
  h2o.max_tokens = 24;
  cases.push_back({"h2o", h2o});
  SamplingParams regex = sampled;
  regex.n = 1;
  regex.structured_outputs.regex = "(once|the) [a-z ]{3,20}\\.";
  cases.push_back({"regex", regex});
  cases.push_back({"q8_0_cache", sampled, "q8_0"});
  return cases;
}

struct Run {
  std::map<int64_t, RequestOutput> finals;
  int64_t callbacks = 0;
};

struct Engine {
  std::unique_ptr<EngineCore> core;
  Run run;
};

Engine Start(const Case& c) {
  EngineConfig cfg;
  cfg.max_model_len = 256;
  cfg.threads = 2;
  cfg.max_num_batched_tokens = 48;  // prompts prefill over several steps
  EXPECT_TRUE(SetConfigField(&cfg, "kv_cache_dtype", c.kv_cache_dtype).ok());
  auto core = EngineCore::Create(cfg);
  EXPECT_TRUE(core.ok()) << core.error().ToString();
  Engine e{std::move(*core), {}};
  const testing::Prompts all = testing::GoldenPrompts();
  for (size_t p = 0; p < 3 && p < all.size(); ++p) {
    const std::vector<int32_t>& ids = all[p];
    Run* run = &e.run;
    auto id = e.core->AddRequest(
        ids, c.params,
        [run](const RequestOutput& o) {
          ++run->callbacks;
          if (o.finished) run->finals[o.request_id] = o;
        },
        0);
    EXPECT_TRUE(id.ok()) << id.error().ToString();
  }
  return e;
}

void Finish(Engine& e) {
  for (int i = 0; i < 10000 && e.core->HasWork(); ++i) ASSERT_TRUE(e.core->Step().ok());
  ASSERT_FALSE(e.core->HasWork()) << "the requests did not finish in 10000 steps";
}

void ExpectSameOutputs(const Run& want, const Run& got) {
  ASSERT_EQ(want.finals.size(), got.finals.size());
  for (const auto& [id, w] : want.finals) {
    const RequestOutput& g = got.finals.at(id);
    ASSERT_EQ(w.outputs.size(), g.outputs.size()) << "request " << id;
    for (size_t k = 0; k < w.outputs.size(); ++k) {
      EXPECT_EQ(w.outputs[k].token_ids, g.outputs[k].token_ids) << "request " << id << "." << k;
      EXPECT_EQ(w.outputs[k].text, g.outputs[k].text);
      EXPECT_EQ(w.outputs[k].finish_reason, g.outputs[k].finish_reason);
      EXPECT_EQ(w.outputs[k].token_logprobs, g.outputs[k].token_logprobs);
    }
    EXPECT_EQ(w.metrics.generated_tokens, g.metrics.generated_tokens);
    EXPECT_EQ(w.metrics.kv_evicted_tokens, g.metrics.kv_evicted_tokens);
  }
}

struct Counters {
  int64_t prompt_tokens, generation_tokens, steps, compactions, callbacks;
  bool operator==(const Counters&) const = default;
};

Counters CountersOf(const Engine& e) {
  const EngineStats s = e.core->Stats();
  return {s.prompt_tokens_total, s.generation_tokens_total, s.steps, s.kv_compactions,
          e.run.callbacks};
}

class EngineStepTest : public ::testing::TestWithParam<Case> {};

TEST_P(EngineStepTest, AFailureBeforeTheCommitChangesNothing) {
  const Case& c = GetParam();
  Engine reference = Start(c);
  Finish(reference);
  ASSERT_FALSE(reference.run.finals.empty());
  if (c.params.kv_policy) {  // the policy must act, or its state would not matter
    ASSERT_GT(reference.run.finals.begin()->second.metrics.kv_evicted_tokens, 0);
  }
  for (Stage stage : {Stage::kBuildBatch, Stage::kForward, Stage::kChooseTokens}) {
    // Fail during prefill (step 1), at the first sample, and mid-decode.
    for (int fail_at : {1, 3, 6}) {
      SCOPED_TRACE(c.name + " stage " + std::to_string(static_cast<int>(stage)) + " step " +
                   std::to_string(fail_at));
      Engine e = Start(c);
      for (int i = 0; i < fail_at && e.core->HasWork(); ++i) ASSERT_TRUE(e.core->Step().ok());
      if (!e.core->HasWork()) continue;
      const Counters before = CountersOf(e);
      e.core->InjectStepFaultForTesting(stage);
      const Status failed = e.core->Step();
      ASSERT_FALSE(failed.ok());
      EXPECT_NE(failed.message().find("injected fault"), std::string::npos) << failed.message();
      EXPECT_EQ(before, CountersOf(e)) << "the failed step changed the engine";
      Finish(e);
      ExpectSameOutputs(reference.run, e.run);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Requests, EngineStepTest, ::testing::ValuesIn(Cases()),
                         [](const auto& p) { return p.param.name; });

}  // namespace
}  // namespace kvforge
