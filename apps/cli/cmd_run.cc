// kvforge run — generate from a prompt, streaming text to stdout and speeds to stderr.
#include <cstdio>
#include <string>

#include "base/strings.h"
#include "commands.h"
#include "flags.h"
#include "kvforge/engine.h"

namespace kvforge::cli {

int RunMain(const Args& args) {
  std::string model, prompt;
  int64_t max_tokens = 128, top_k = 40, seed = -1, threads = 0, ctx = 0;
  double temperature = 0.8, top_p = 0.95, min_p = 0.05, repeat_penalty = 1.0;
  bool json = false, ignore_eos = false, kv_f32 = false;
  FlagParser p("run", "Generate text from a prompt. Text streams to stdout; prefill/decode speed and\n"
                      "time to first token go to stderr (or into the JSON object with --json).");
  p.AddString("model", &model, "GGUF model path (default: the embedded stories260K model)");
  p.AddString("prompt", &prompt, "prompt text");
  p.AddInt("max-tokens", &max_tokens, "tokens to generate");
  p.AddFloat("temperature", &temperature, "sampling temperature (0 = greedy)");
  p.AddFloat("top-p", &top_p, "nucleus sampling threshold (1 = off)");
  p.AddInt("top-k", &top_k, "keep the k most likely tokens (0 = off)");
  p.AddFloat("min-p", &min_p, "drop tokens below min-p x the top probability (0 = off)");
  p.AddFloat("repeat-penalty", &repeat_penalty, "repetition penalty (1 = off)");
  p.AddInt("seed", &seed, "RNG seed (-1 = random)");
  p.AddInt("threads", &threads, "compute threads (0 = one per core)");
  p.AddInt("ctx", &ctx, "context length (0 = the model's, at most 8192)");
  p.AddBool("ignore-eos", &ignore_eos, "keep generating after end-of-sequence");
  p.AddBool("kv-f32", &kv_f32, "store the KV cache in f32 instead of f16");
  p.AddBool("json", &json, "print one JSON object instead of streaming");
  p.Require("prompt");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (max_tokens < 0 || max_tokens > 1000000) {
    std::fprintf(stderr, "kvforge: --max-tokens must be between 0 and 1000000\n");
    return 2;
  }
  if (threads < 0 || ctx < 0 || top_k < 0) {
    std::fprintf(stderr, "kvforge: --threads, --ctx and --top-k must not be negative\n");
    return 2;
  }
  SamplingParams sp;
  sp.temperature = static_cast<float>(temperature);
  sp.top_p = static_cast<float>(top_p);
  sp.top_k = static_cast<int32_t>(top_k);
  sp.min_p = static_cast<float>(min_p);
  sp.repetition_penalty = static_cast<float>(repeat_penalty);
  sp.max_tokens = static_cast<int32_t>(max_tokens);
  sp.ignore_eos = ignore_eos;
  if (seed >= 0) sp.seed = static_cast<uint64_t>(seed);
  if (Status s = sp.Validate(); !s.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", s.message().c_str());
    return 2;
  }
  EngineOptions eo;
  eo.model_path = model;
  eo.threads = static_cast<int>(threads);
  eo.max_context = ctx;
  eo.kv_f16 = !kv_f32;
  auto engine = Engine::Create(eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", engine.error().message().c_str());
    return 1;
  }
  auto ids = (*engine)->Tokenize(prompt, true, false);
  if (!ids.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", ids.error().message().c_str());
    return 1;
  }
  if (!json) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
  }
  auto res = (*engine)->Generate(*ids, sp, [&](int32_t, const std::string& piece) {
    if (!json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  });
  if (!res.ok()) {
    std::fprintf(stderr, "\nkvforge: %s\n", res.error().message().c_str());
    return 1;
  }
  const GenerationResult& r = *res;
  if (json) {
    std::string out = "{\"prompt_tokens\":[";
    for (size_t i = 0; i < r.prompt_tokens.size(); ++i) out += (i ? "," : "") + std::to_string(r.prompt_tokens[i]);
    out += "],\"tokens\":[";
    for (size_t i = 0; i < r.tokens.size(); ++i) out += (i ? "," : "") + std::to_string(r.tokens[i]);
    out += "],\"text\":" + base::JsonQuote(r.text);
    out += base::StrFormat(",\"finish_reason\":\"%s\",\"ttft_ms\":%.3f,\"prefill_tokens_per_s\":%.2f,"
                           "\"decode_tokens_per_s\":%.2f}\n",
                           FinishReasonName(r.finish), r.ttft_ms, r.prefill_tokens_per_s, r.decode_tokens_per_s);
    std::fputs(out.c_str(), stdout);
  } else {
    std::fputs("\n", stdout);
    std::fprintf(stderr,
                 "\nkvforge: prompt %zu tokens, prefill %.1f tokens/s, time to first token %.2f ms; "
                 "generated %zu tokens, decode %.1f tokens/s (%d threads, finish: %s)\n",
                 r.prompt_tokens.size(), r.prefill_tokens_per_s, r.ttft_ms, r.tokens.size(),
                 r.decode_tokens_per_s, (*engine)->num_threads(), FinishReasonName(r.finish));
  }
  return 0;
}

}  // namespace kvforge::cli
