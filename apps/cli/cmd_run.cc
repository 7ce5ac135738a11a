// kvforge run — generate from a prompt, streaming text to stdout and speeds to stderr.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "chat_prompt.h"
#include "commands.h"
#include "engine_flags.h"
#include "flags.h"
#include "kvforge/engine.h"
#include "kvforge/llm.h"
#include "read_file.h"
#include "run_report.h"

namespace kvforge::cli {

namespace {

// Every line of the file is a request; all run concurrently through the batching engine; one
// JSON object per request is printed in input order.
int RunPromptsFile(const std::string& path, const EngineConfig& cfg, const SamplingParams& sp,
                   bool json) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "kvforge: cannot read %s\n", path.c_str());
    return 1;
  }
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);) prompts.push_back(line);
  LLM llm(cfg);
  if (!llm.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", llm.status().message().c_str());
    return 1;
  }
  auto outs = llm.generate(prompts, sp);
  if (!outs.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", outs.error().message().c_str());
    return 1;
  }
  for (size_t i = 0; i < outs->size(); ++i) {
    const RequestOutput& o = (*outs)[i];
    if (json)
      std::fputs(RequestOutputJson(o).c_str(), stdout);
    else
      std::printf("[%zu] %s%s\n", i, prompts[i].c_str(), o.outputs[0].text.c_str());
  }
  return 0;
}

}  // namespace

int RunMain(const Args& args) {
  std::string prompt, prompts_file, system, chat_template_file;
  bool chat = false;
  int64_t max_tokens = 128, top_k = 40, seed = -1;
  double temperature = 0.8, top_p = 0.95, min_p = 0.05, repeat_penalty = 1.0;
  bool json = false, ignore_eos = false;
  std::string grammar_file, json_schema_file, regex;
  EngineConfig cfg;
  FlagParser p("run",
               "Generate text from a prompt. Text streams to stdout; prefill/decode speed and\n"
               "time to first token go to stderr (or into the JSON object with --json).");
  p.Section("request");
  p.AddString("prompt", &prompt, "prompt text");
  p.AddString("prompts-file", &prompts_file,
              "run every line of FILE as a request, concurrently (JSON per line with --json)");
  p.AddInt("max-tokens", &max_tokens, "tokens to generate");
  p.AddFloat("temperature", &temperature, "sampling temperature (0 = greedy)");
  p.AddFloat("top-p", &top_p, "nucleus sampling threshold (1 = off)");
  p.AddInt("top-k", &top_k, "keep the k most likely tokens (0 = off)");
  p.AddFloat("min-p", &min_p, "drop tokens below min-p x the top probability (0 = off)");
  p.AddFloat("repeat-penalty", &repeat_penalty, "repetition penalty (1 = off)");
  p.AddInt("seed", &seed, "RNG seed (-1 = random)");
  p.AddBool("ignore-eos", &ignore_eos, "keep generating after end-of-sequence");
  p.AddString("grammar-file", &grammar_file, "constrain the output to a GBNF grammar file");
  p.AddString("json-schema", &json_schema_file,
              "constrain the output to JSON valid under this JSON Schema file");
  p.AddString("regex", &regex, "constrain the output to a full match of this regular expression");
  p.AddBool("json", &json, "print one JSON object instead of streaming");
  p.AddBool("chat", &chat,
            "treat --prompt as a user message rendered with the model's chat template");
  p.AddString("system", &system, "system message for --chat");
  p.AddString("chat-template", &chat_template_file,
              "Jinja2 chat template file overriding the model's");
  AddEngineFlags(p, &cfg);
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (prompt.empty() == prompts_file.empty() && !p.Given("prompt")) {
    std::fprintf(stderr, "kvforge: give --prompt TEXT or --prompts-file FILE\n");
    return 2;
  }
  if (max_tokens < 0 || max_tokens > 1000000) {
    std::fprintf(stderr, "kvforge: --max-tokens must be between 0 and 1000000\n");
    return 2;
  }
  if (top_k < 0) {
    std::fprintf(stderr, "kvforge: --top-k must not be negative\n");
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
  sp.structured_outputs.regex = regex;
  if (!grammar_file.empty() && !ReadFile(grammar_file, &sp.structured_outputs.grammar)) {
    std::fprintf(stderr, "kvforge: cannot read --grammar-file %s\n", grammar_file.c_str());
    return 2;
  }
  if (!json_schema_file.empty() && !ReadFile(json_schema_file, &sp.structured_outputs.json)) {
    std::fprintf(stderr, "kvforge: cannot read --json-schema %s\n", json_schema_file.c_str());
    return 2;
  }
  if (Status s = sp.Validate(); !s.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", s.message().c_str());
    return 2;
  }
  if (!prompts_file.empty()) return RunPromptsFile(prompts_file, cfg, sp, json);
  auto engine = Engine::Create(cfg);
  if (!engine.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", engine.error().message().c_str());
    return 1;
  }
  bool parse_special = false, add_special = true;
  if (chat) {
    std::string source = (*engine)->info().chat_template;
    if (!chat_template_file.empty()) {
      std::ifstream tf(chat_template_file, std::ios::binary);
      if (!tf) {
        std::fprintf(stderr, "kvforge: cannot read %s\n", chat_template_file.c_str());
        return 1;
      }
      source.assign(std::istreambuf_iterator<char>(tf), std::istreambuf_iterator<char>());
    }
    const ModelInfo& mi = (*engine)->info();
    auto rendered = RenderChatPrompt(source, system, prompt, mi.bos_text, mi.eos_text);
    if (!rendered.ok()) {
      std::fprintf(stderr, "kvforge: chat template: %s\n", rendered.error().message().c_str());
      return 1;
    }
    prompt = *rendered;
    parse_special = true;  // the template's special-token text becomes those tokens
    // Templates that write the BOS text themselves must not get a second BOS.
    add_special = mi.bos_text.empty() || prompt.compare(0, mi.bos_text.size(), mi.bos_text) != 0;
  }
  auto ids = (*engine)->Tokenize(prompt, add_special, parse_special);
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
    std::fputs(GenerationResultJson(r).c_str(), stdout);
  } else {
    std::fputs("\n", stdout);
    std::fprintf(
        stderr,
        "\nkvforge: prompt %zu tokens, prefill %.1f tokens/s, time to first token %.2f ms; "
        "generated %zu tokens, decode %.1f tokens/s (%d threads, finish: %s)\n",
        r.prompt_tokens.size(), r.prefill_tokens_per_s, r.ttft_ms, r.tokens.size(),
        r.decode_tokens_per_s, (*engine)->num_threads(), FinishReasonName(r.finish));
    if (r.kv_peak_tokens > 0)
      std::fprintf(stderr,
                   "kvforge: KV eviction: %lld tokens evicted, at most %lld held, %lld at "
                   "the end\n",
                   (long long)r.kv_evicted_tokens, (long long)r.kv_peak_tokens,
                   (long long)r.kv_final_tokens);
  }
  return 0;
}

}  // namespace kvforge::cli
