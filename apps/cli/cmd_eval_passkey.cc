// kvforge eval passkey — retrieval accuracy under a KV policy (see passkey_task.h): a key planted
// at depths 0..100% of a filler context, greedy answers scored exactly.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/strings.h"
#include "commands.h"
#include "engine_flags.h"
#include "eval_common.h"
#include "flags.h"
#include "kvforge/config_names.h"
#include "kvforge/engine.h"
#include "passkey_task.h"

namespace kvforge::cli {
namespace {

struct Trial {
  std::string key, answer;
  bool correct = false;
  int digits_right = 0;  // leading digits of the key reproduced
};

struct DepthResult {
  double depth = 0;
  int64_t prompt_tokens = 0;  // of the last trial (the keys' lengths are equal)
  int64_t needle_token = 0;
  int64_t kv_final_tokens = 0;  // KV slots held at the end
  std::vector<Trial> trials;
  int64_t Correct() const {
    int64_t n = 0;
    for (const auto& t : trials) n += t.correct;
    return n;
  }
  int64_t DigitsRight() const {
    int64_t n = 0;
    for (const auto& t : trials) n += t.digits_right;
    return n;
  }
};

Result<DepthResult> RunDepth(Engine& engine, const TokenizeFn& tokenize, int64_t sentences,
                             double depth, int64_t trials, int digits, std::mt19937_64& rng) {
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = digits + 3;  // a space, the digits, a period (tokenizers differ)
  DepthResult d;
  d.depth = depth;
  for (int64_t t = 0; t < trials; ++t) {
    KVF_ASSIGN_OR_RETURN(
        auto prompt, BuildPasskeyPrompt(tokenize, sentences, depth, RandomPasskey(digits, rng)));
    KVF_ASSIGN_OR_RETURN(auto gen, engine.Generate(prompt.tokens, sp));
    d.prompt_tokens = static_cast<int64_t>(prompt.tokens.size());
    d.needle_token = prompt.needle_token;
    // Without a policy every token's KV stays.
    d.kv_final_tokens = gen.kv_final_tokens > 0
                            ? gen.kv_final_tokens
                            : static_cast<int64_t>(prompt.tokens.size() + gen.tokens.size());
    d.trials.push_back({prompt.key, gen.text, PasskeyRetrieved(gen.text, prompt.key),
                        PasskeyDigitsRetrieved(gen.text, prompt.key)});
  }
  return d;
}

std::string DepthJson(const DepthResult& d, int digits) {
  std::string answers;
  for (const auto& t : d.trials) {
    if (!answers.empty()) answers += ",";
    answers += base::StrFormat("{\"key\":\"%s\",\"answer\":%s,\"correct\":%s}", t.key.c_str(),
                               base::JsonQuote(t.answer).c_str(), t.correct ? "true" : "false");
  }
  const auto n = static_cast<double>(d.trials.size());
  return base::StrFormat(
      "{\"depth\":%.4f,\"accuracy\":%.6f,\"digit_accuracy\":%.6f,\"correct\":%lld,"
      "\"trials\":%lld,\"prompt_tokens\":%lld,\"needle_token\":%lld,\"kv_final_tokens\":%lld,"
      "\"answers\":[%s]}",
      d.depth, n > 0 ? static_cast<double>(d.Correct()) / n : 0.0,
      n > 0 ? static_cast<double>(d.DigitsRight()) / (n * digits) : 0.0, (long long)d.Correct(),
      (long long)d.trials.size(), (long long)d.prompt_tokens, (long long)d.needle_token,
      (long long)d.kv_final_tokens, answers.c_str());
}

}  // namespace

int EvalPasskeyMain(const Args& args) {
  int64_t context = 2048, n_depths = 11, trials = 3, digits = 5, seed = 1;
  bool json = false;
  EngineConfig eo;
  FlagParser p(
      "eval passkey",
      "Passkey retrieval: a 5-digit key planted at --n-depths depths (0% = right after the\n"
      "instruction, 100% = just before the question) of a filler context of about\n"
      "--context-tokens tokens; the greedy answer must start with the key. Accuracy per depth\n"
      "and overall, under the KV flags (--kv-policy, --kv-budget, --kv-dtype). Trained\n"
      "TinyStories models cannot retrieve; kvforge make-model --induction writes one that does.");
  p.AddInt("context-tokens", &context, "prompt length in tokens (at most)");
  p.AddInt("n-depths", &n_depths, "depths, evenly spaced over 0..100%");
  p.AddInt("trials", &trials, "keys per depth");
  p.AddInt("digits", &digits, "digits per key (distinct, 1..10)");
  p.AddInt("seed", &seed, "RNG seed for the keys");
  p.AddBool("json", &json, "print a JSON object");
  AddEngineFlags(p, &eo);
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (context < 32 || context > (1 << 20) || n_depths < 1 || n_depths > 101 || trials < 1 ||
      trials > 1000 || digits < 1 || digits > 10) {
    std::fprintf(stderr,
                 "kvforge: --context-tokens must be 32..1048576, --n-depths 1..101, --trials "
                 "1..1000, --digits 1..10\n");
    return 2;
  }
  if (!p.Given("max-model-len")) eo.max_model_len = context + digits + 8;
  auto engine = CreateEvalEngine(eo);
  if (!engine) return 1;
  const TokenizeFn tokenize = [&](const std::string& text) {
    return engine->Tokenize(text, /*add_special=*/true, /*parse_special=*/false);
  };
  auto sentences = FillerSentencesFor(tokenize, context);
  if (!sentences.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", sentences.error().message().c_str());
    return 2;
  }
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<DepthResult> results;
  int64_t correct = 0, total = 0, digits_right = 0;
  for (int64_t i = 0; i < n_depths; ++i) {
    const double depth = n_depths == 1 ? 0.5 : static_cast<double>(i) / (n_depths - 1);
    auto d = RunDepth(*engine, tokenize, *sentences, depth, trials, static_cast<int>(digits), rng);
    if (!d.ok()) {
      std::fprintf(stderr, "kvforge: %s\n", d.error().message().c_str());
      return 1;
    }
    correct += d->Correct();
    digits_right += d->DigitsRight();
    total += static_cast<int64_t>(d->trials.size());
    if (!json)
      std::printf("depth %5.1f%%  %lld/%lld  (needle at token %lld of %lld, KV kept %lld)\n",
                  100 * depth, (long long)d->Correct(), (long long)d->trials.size(),
                  (long long)d->needle_token, (long long)d->prompt_tokens,
                  (long long)d->kv_final_tokens);
    results.push_back(std::move(*d));
  }
  const double accuracy = static_cast<double>(correct) / static_cast<double>(total);
  const double digit_accuracy =
      static_cast<double>(digits_right) / static_cast<double>(total * digits);
  const KvPolicy& pol = eo.kv_policy;
  if (!json) {
    std::printf("accuracy %.4f (%lld/%lld), digits %.4f; kv_policy %s, budget %g\n", accuracy,
                (long long)correct, (long long)total, digit_accuracy, KvPolicyName(pol.kind).data(),
                pol.budget);
    return 0;
  }
  std::string depths;
  for (const auto& d : results)
    depths += (depths.empty() ? "" : ",") + DepthJson(d, static_cast<int>(digits));
  std::printf(
      "{\"model\":%s,\"context_tokens\":%lld,\"digits\":%lld,\"trials_per_depth\":%lld,"
      "\"kv_policy\":\"%s\",\"kv_budget\":%g,\"kv_dtype\":%s,\"accuracy\":%.6f,"
      "\"digit_accuracy\":%.6f,\"correct\":%lld,"
      "\"trials\":%lld,\"depths\":[%s]}\n",
      base::JsonQuote(eo.model.empty() ? "(embedded)" : eo.model).c_str(), (long long)context,
      (long long)digits, (long long)trials, KvPolicyName(pol.kind).data(), pol.budget,
      base::JsonQuote(ConfigName(eo.kv_cache_dtype)).c_str(), accuracy, digit_accuracy,
      (long long)correct, (long long)total, depths.c_str());
  return 0;
}

}  // namespace kvforge::cli
