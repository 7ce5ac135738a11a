// kvforge eval ppl — perplexity with llama.cpp's llama-perplexity protocol.
#include <cstdio>
#include <string>

#include "base/strings.h"
#include "commands.h"
#include "engine_flags.h"
#include "eval_common.h"
#include "flags.h"
#include "kvforge/engine.h"

namespace kvforge::cli {
namespace {

int PplMain(const Args& args) {
  std::string text_path;
  int64_t ctx = 512, chunks = -1;
  bool json = false;
  EngineConfig eo;
  FlagParser p(
      "eval ppl",
      "Perplexity as llama-perplexity computes it: the text tokenized once (with BOS),\n"
      "split into chunks of --ctx tokens, each chunk's first token replaced by BOS, the\n"
      "second half of each chunk scored. Prints the running value per chunk and the final PPL.");
  p.AddString("text", &text_path, "UTF-8 text file");
  p.AddInt("ctx", &ctx, "tokens per chunk (also the engine's max_model_len)");
  p.AddInt("chunks", &chunks, "at most this many chunks (-1 = all)");
  p.AddBool("json", &json, "print a JSON object");
  AddEngineFlags(p, &eo);
  p.Require("text");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (ctx < 8 || ctx > 1 << 20 || chunks < -1) {
    std::fprintf(stderr, "kvforge: --ctx must be 8..1048576, --chunks >= -1\n");
    return 2;
  }
  std::string text;
  if (!ReadEvalText(text_path, &text)) return 1;
  if (!p.Given("max-model-len")) eo.max_model_len = ctx;
  if (eo.kv_policy.enabled()) {
    // Teacher-forced chunks attend before any eviction could happen: the number would not move.
    std::fprintf(stderr,
                 "kvforge: eval ppl scores teacher-forced chunks, which KV eviction does not "
                 "change; use eval kv --kv-policy (streaming and compress_continue regimes)\n");
    return 2;
  }
  auto engine = CreateEvalEngine(eo);
  if (!engine) return 1;
  PerplexityOptions po;
  po.ctx = ctx;
  po.max_chunks = chunks;
  po.progress = [&](int64_t c, int64_t n, double ppl) {
    if (json)
      std::fprintf(stderr, "\r[%lld/%lld] ppl %.4f", (long long)c, (long long)n, ppl);
    else
      std::printf("[%lld/%lld] %.4f\n", (long long)c, (long long)n, ppl);
    std::fflush(stdout);
  };
  auto r = engine->Perplexity(text, po);
  if (json) std::fputs("\n", stderr);
  if (!r.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", r.error().message().c_str());
    return 1;
  }
  if (json) {
    std::printf(
        "{\"ppl\":%.6f,\"stderr\":%.6f,\"chunks\":%lld,\"tokens_scored\":%lld,\"ctx\":%lld}\n",
        r->ppl, r->stderr_ppl, (long long)r->chunks, (long long)r->tokens_scored, (long long)ctx);
  } else {
    std::printf(
        "Final estimate: PPL = %.4f +/- %.5f (%lld chunks of %lld tokens, %lld tokens scored)\n",
        r->ppl, r->stderr_ppl, (long long)r->chunks, (long long)ctx, (long long)r->tokens_scored);
  }
  return 0;
}

}  // namespace

int EvalMain(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs("usage: kvforge eval ppl|kv|passkey|stream [flags]   (kvforge eval ppl --help)\n",
               args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "ppl") return PplMain(Args(args.begin() + 1, args.end()));
  if (args[0] == "kv") return EvalKvMain(Args(args.begin() + 1, args.end()));
  if (args[0] == "passkey") return EvalPasskeyMain(Args(args.begin() + 1, args.end()));
  if (args[0] == "stream") return EvalStreamMain(Args(args.begin() + 1, args.end()));
  std::fprintf(stderr, "kvforge: unknown eval mode '%s' (available: ppl, kv, passkey, stream)\n",
               args[0].c_str());
  return 2;
}

}  // namespace kvforge::cli
