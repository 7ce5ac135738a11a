// kvforge — one executable, many subcommands. Each subcommand lives in its own cmd_*.cc.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/log.h"
#include "commands.h"

namespace {

struct Command {
  const char* name;
  int (*fn)(const kvforge::cli::Args&);
  const char* summary;
};

const Command kCommands[] = {
    {"run", kvforge::cli::RunMain,
     "generate text from a prompt (embedded default model if no --model)"},
    {"tokenize", kvforge::cli::TokenizeMain, "print the token ids of stdin's text"},
    {"info", kvforge::cli::InfoMain,
     "describe a GGUF model: architecture, sizes, dtypes, KV bytes/token"},
    {"make-model", kvforge::cli::MakeModelMain,
     "write a random-weight GGUF model for tests and benchmarks"},
    {"quantize", kvforge::cli::QuantizeMain,
     "quantize a float GGUF model (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k)"},
    {"eval", kvforge::cli::EvalMain, "evaluate a model (eval ppl: perplexity on a text)"},
    {"bench", kvforge::cli::BenchMain,
     "benchmarks: throughput, latency (pp/tg), memory (paging, sharing)"},
    {"calc", kvforge::cli::CalcMain, "KV-cache memory calculator"},
    {"serve", kvforge::cli::ServeMain, "OpenAI-compatible HTTP server (streaming, metrics)"},
    {"route", kvforge::cli::RouteMain,
     "cache-aware router in front of several `kvforge serve` workers"},
    {"chat-template", kvforge::cli::ChatTemplateMain, "render a chat template with messages"},
};

void PrintUsage(FILE* out) {
  std::fprintf(
      out,
      "usage: kvforge <command> [flags]   (kvforge <command> --help for its flags)\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-14s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    PrintUsage(stdout);
    return 0;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  // Info-level logs (e.g. the KV cache size at start) go to stderr; KVF_LOG=warn silences them.
  const char* lvl = std::getenv("KVF_LOG");
  kvforge::base::SetLogLevel(lvl && std::strcmp(lvl, "warn") == 0 ? kvforge::base::LogLevel::kWarn
                             : lvl && std::strcmp(lvl, "debug") == 0
                                 ? kvforge::base::LogLevel::kDebug
                                 : kvforge::base::LogLevel::kInfo);
  for (const auto& c : kCommands)
    if (cmd == c.name) return c.fn(args);
  std::fprintf(stderr, "kvforge: unknown command '%s'\n", cmd.c_str());
  PrintUsage(stderr);
  return 2;
}
