// kvforge eval stream — StreamingLLM's evaluation: a text (repeated until --tokens) scored as ONE
// sequence, one token per step, under a KV policy; perplexity per window of --report-every
// tokens and the KV slots held, so a long run shows whether quality and memory stay flat.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "base/strings.h"
#include "commands.h"
#include "engine_flags.h"
#include "eval_common.h"
#include "flags.h"
#include "kvforge/engine.h"

namespace kvforge::cli {
namespace {

struct Window {
  int64_t end = 0;  // tokens scored so far
  double ppl = 0;
  int64_t kv_slots = 0, kv_slots_max = 0;
};

// `text`'s tokens (BOS first), repeated without further BOS until `n` tokens.
Result<std::vector<int32_t>> RepeatedTokens(Engine& engine, const std::string& text, int64_t n) {
  KVF_ASSIGN_OR_RETURN(auto once, engine.Tokenize(text, true, false));
  KVF_ASSIGN_OR_RETURN(auto body, engine.Tokenize(text, false, false));
  if (body.empty()) return Status::InvalidArgument("the text has no tokens");
  std::vector<int32_t> out = once;
  while (static_cast<int64_t>(out.size()) < n) out.insert(out.end(), body.begin(), body.end());
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

int EvalStreamMain(const Args& args) {
  std::string text_path;
  int64_t tokens = 100000, every = 10000;
  bool json = false;
  EngineConfig eo;
  FlagParser p(
      "eval stream",
      "Scores a text (repeated until --tokens) as one sequence, one token per step, under the KV\n"
      "flags (StreamingLLM's evaluation: --kv-policy streaming --kv-budget B runs past the\n"
      "context). Prints the perplexity of each --report-every window and the KV slots held.");
  p.AddString("text", &text_path, "UTF-8 text file");
  p.AddInt("tokens", &tokens, "tokens to score");
  p.AddInt("report-every", &every, "tokens per reported window");
  p.AddBool("json", &json, "print a JSON object");
  AddEngineFlags(p, &eo);
  p.Require("text");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (tokens < 2 || tokens > (1LL << 32) || every < 1) {
    std::fprintf(stderr, "kvforge: --tokens must be 2..2^32, --report-every >= 1\n");
    return 2;
  }
  std::string text;
  if (!ReadEvalText(text_path, &text)) return 1;
  auto engine = CreateEvalEngine(eo);
  if (!engine) return 1;
  auto ids = RepeatedTokens(*engine, text, tokens);
  if (!ids.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", ids.error().message().c_str());
    return 1;
  }
  std::vector<Window> windows;
  double nll_window = 0, nll_total = 0;
  int64_t in_window = 0, slots_max = 0;
  Status st = engine->ScoreStream(*ids, [&](int64_t i, double nll, int64_t slots) {
    nll_window += nll;
    nll_total += nll;
    slots_max = std::max(slots_max, slots);
    if (++in_window == every || i + 1 == tokens) {
      windows.push_back(
          {i, std::exp(nll_window / static_cast<double>(in_window)), slots, slots_max});
      if (!json)
        std::printf("tokens %10lld  window PPL %8.4f  KV slots %lld (max %lld)\n", (long long)i,
                    windows.back().ppl, (long long)slots, (long long)slots_max);
      std::fflush(stdout);
      nll_window = 0;
      in_window = 0;
    }
    return true;
  });
  if (!st.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", st.message().c_str());
    return 1;
  }
  const double ppl = std::exp(nll_total / static_cast<double>(tokens - 1));
  const KvPolicy& pol = eo.kv_policy;
  if (!json) {
    std::printf("PPL %.4f over %lld tokens (kv_policy %s, budget %g)\n", ppl,
                (long long)(tokens - 1), KvPolicyName(pol.kind).data(), pol.budget);
    return 0;
  }
  std::string points;
  for (const auto& w : windows)
    points += base::StrFormat(
        "%s{\"tokens\":%lld,\"window_ppl\":%.6f,\"kv_slots\":%lld,"
        "\"kv_slots_max\":%lld}",
        points.empty() ? "" : ",", (long long)w.end, w.ppl, (long long)w.kv_slots,
        (long long)w.kv_slots_max);
  std::printf(
      "{\"tokens\":%lld,\"ppl\":%.6f,\"kv_policy\":\"%s\",\"kv_budget\":%g,\"kv_sinks\":%d,"
      "\"windows\":[%s]}\n",
      (long long)tokens, ppl, KvPolicyName(pol.kind).data(), pol.budget, pol.sinks, points.c_str());
  return 0;
}

}  // namespace kvforge::cli
