// kvforge serve — the OpenAI-compatible HTTP server (src/server) over the batching engine.
//
// SIGINT and SIGTERM are blocked in every thread and taken by the main thread with sigwait: the
// server then refuses new requests, aborts the running ones, stops accepting and exits 0.
#include <pthread.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "commands.h"
#include "flags.h"
#include "kv_flags.h"
#include "kvforge/config_names.h"
#include "kvforge/llm.h"
#include "server/server.h"

namespace kvforge::cli {

namespace {

// "models/stories260K.gguf" -> "stories260K".
std::string ModelId(const std::string& path) {
  if (path.empty()) return "stories260K";
  std::string name =
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0)
    name.resize(name.size() - 5);
  return name.empty() ? path : name;
}

}  // namespace

// Decode-priority chunking's target for `kvforge serve`, chosen from measurement (ADR 0012).
constexpr double kServeMaxItlMs = 200;

int ServeMain(const Args& args) {
  std::string model, host = "127.0.0.1", api_key, preemption = "recompute", policy = "fcfs",
                     chat_template_file, served_name, prefix_cache = "hash", tool_call_parser,
                     reasoning_parser;
  int64_t port = 8000, max_model_len = 0, max_num_seqs = 64, max_batched = 2048, block_size = 16,
          threads = 0;
  int64_t max_queue = 128, http_threads = 0, long_prefill = 0,
          min_prefill_chunk = EngineConfig{}.min_prefill_chunk;
  // Serving is timing-dependent anyway; the library's default (0) keeps offline runs reproducible.
  double max_itl_ms = kServeMaxItlMs;
  bool mlock = false, no_webui = false;
  uint64_t kv_mem = 0, max_body = 4u << 20;
  FlagParser p(
      "serve",
      "Serve the OpenAI-compatible API (/v1/completions, /v1/chat/completions, /v1/models, "
      "/health,\n"
      "/metrics, /tokenize, /detokenize) over the continuous-batching engine, and a web page at /. "
      "The bound address "
      "is\n"
      "printed on stderr; SIGINT/SIGTERM shut down gracefully (in-flight requests are aborted).");
  p.AddString("model", &model, "GGUF model path (default: the embedded stories260K model)");
  p.AddString("served-model-name", &served_name,
              "model id in the API (default: the file name without .gguf)");
  p.AddString("host", &host, "address to listen on");
  p.AddInt("port", &port, "TCP port (0: an ephemeral port)");
  p.AddString("api-key", &api_key,
              "require 'Authorization: Bearer KEY' (not for /health and /metrics)");
  p.AddInt("max-model-len", &max_model_len, "context length (0: the model's, at most 8192)");
  p.AddSize("kv-cache-memory", &kv_mem, "KV pool budget, e.g. 512MiB (0: automatic)");
  p.AddAlias("kv-cache-memory-bytes", "kv-cache-memory");
  p.AddInt("max-num-seqs", &max_num_seqs, "running sequences per step");
  p.AddInt("max-num-batched-tokens", &max_batched, "tokens per forward step");
  p.AddInt("block-size", &block_size, "KV block tokens");
  p.AddInt("long-prefill-token-threshold", &long_prefill,
           "largest prefill chunk per step (0: the token budget); bounds streaming ITL");
  p.AddFloat("max-itl-ms", &max_itl_ms,
             "decode-priority chunking: cut a step's prefill so the step's predicted time stays "
             "within this many ms while sequences decode (0: off; docs/adr/0012)");
  p.AddInt("min-prefill-chunk", &min_prefill_chunk,
           "decode-priority chunking: most prefill tokens a step with decodes always carries "
           "(fewer when they would add over a quarter of --max-itl-ms)");
  p.AddInt("threads", &threads, "compute threads (0: one per core)");
  p.AddString("preemption", &preemption, "recompute | swap");
  p.AddAlias("preemption-mode", "preemption");
  p.AddBool("mlock", &mlock, "pin the model's weights in RAM");
  p.AddString("prefix-cache", &prefix_cache,
              "off | hash (vLLM-style block hashes) | radix (SGLang-style radix tree)");
  p.AddString("scheduling-policy", &policy,
              "fcfs | priority (requests' \"priority\" field; lower first)");
  p.AddSize("max-body-bytes", &max_body, "largest request body accepted (413 beyond)");
  p.AddInt("max-queue", &max_queue, "sequences that may wait beyond --max-num-seqs (429 beyond)");
  p.AddInt("http-threads", &http_threads, "HTTP worker threads (0: max-num-seqs + max-queue + 16)");
  p.AddString("chat-template", &chat_template_file,
              "Jinja2 chat template file overriding the model's");
  p.AddString("tool-call-parser", &tool_call_parser,
              "how replies write tool calls: hermes | llama3_json | mistral | deepseek_v3 "
              "(default: the format the chat template shows, else hermes)");
  p.AddString("reasoning-parser", &reasoning_parser,
              "deepseek_r1 | qwen3: <think>...</think> in chat replies becomes reasoning_content "
              "and constraints apply after it (default: off)");
  p.AddBool("no-webui", &no_webui,
            "no web page at / (the chat playground and KV-cache inspector; its JSON endpoints "
            "/v1/kvforge/kv and /v1/kvforge/history stay)");
  KvFlags kv;
  AddKvFlags(p, &kv);
  AddOffloadFlags(p, &kv);
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (port < 0 || port > 65535) {
    std::fprintf(stderr, "kvforge: --port must be in 0..65535\n");
    return 2;
  }
  if (max_num_seqs <= 0 || max_batched <= 0 || block_size <= 0 || threads < 0 ||
      max_model_len < 0 || max_queue < 0 || http_threads < 0 || http_threads > 4096 ||
      long_prefill < 0 || max_body < 64 || min_prefill_chunk < 1 || !(max_itl_ms >= 0) ||
      !std::isfinite(max_itl_ms)) {
    std::fprintf(stderr,
                 "kvforge: --max-num-seqs, --max-num-batched-tokens and --block-size must be "
                 "positive; --threads, "
                 "--max-model-len, --max-queue, --http-threads (at most 4096) and --max-itl-ms not "
                 "negative; --max-body-bytes at least 64; --min-prefill-chunk at least 1\n");
    return 2;
  }
  if (preemption != "recompute" && preemption != "swap") {
    std::fprintf(stderr, "kvforge: --preemption must be 'recompute' or 'swap'\n");
    return 2;
  }
  if (prefix_cache != "off" && prefix_cache != "hash" && prefix_cache != "radix") {
    std::fprintf(stderr, "kvforge: --prefix-cache must be off, hash or radix\n");
    return 2;
  }
  if (policy != "fcfs" && policy != "priority") {
    std::fprintf(stderr, "kvforge: --scheduling-policy must be 'fcfs' or 'priority'\n");
    return 2;
  }
  server::ServerOptions so;
  so.tool_call_parser = tool_call_parser;
  so.reasoning_parser = reasoning_parser;
  if (!chat_template_file.empty()) {
    std::ifstream tf(chat_template_file, std::ios::binary);
    if (!tf) {
      std::fprintf(stderr, "kvforge: cannot read %s\n", chat_template_file.c_str());
      return 1;
    }
    so.chat_template.assign(std::istreambuf_iterator<char>(tf), std::istreambuf_iterator<char>());
    if (so.chat_template.empty()) {
      std::fprintf(stderr, "kvforge: %s is empty\n", chat_template_file.c_str());
      return 2;
    }
  }
  EngineConfig cfg;
  cfg.model = model;
  cfg.max_model_len = max_model_len;
  cfg.kv_cache_memory_bytes = kv_mem;
  cfg.max_num_seqs = max_num_seqs;
  cfg.max_num_batched_tokens = max_batched;
  cfg.block_size = static_cast<int32_t>(block_size);
  cfg.threads = static_cast<int>(threads);
  if (Status s = SetConfigField(&cfg, "preemption_mode", preemption); !s.ok())
    return BadFlagValue(s.WithContext("--preemption"));
  if (Status s = SetConfigField(&cfg, "scheduling_policy", policy); !s.ok())
    return BadFlagValue(s.WithContext("--scheduling-policy"));
  cfg.mlock = mlock;
  cfg.long_prefill_token_threshold = long_prefill;
  cfg.max_itl_ms = max_itl_ms;
  cfg.min_prefill_chunk = min_prefill_chunk;
  cfg.enable_prefix_caching = prefix_cache != "off";
  if (cfg.enable_prefix_caching)
    if (Status s = SetConfigField(&cfg, "prefix_cache_mode", prefix_cache); !s.ok())
      return BadFlagValue(s.WithContext("--prefix-cache"));
  if (Status s = ApplyKvFlags(kv, &cfg); !s.ok()) return BadFlagValue(s);

  // Every thread created from here on inherits the blocked signals; only sigwait below takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto engine = AsyncEngine::Create(cfg);
  if (!engine.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", engine.error().message().c_str());
    return 1;
  }
  so.host = host;
  so.port = static_cast<int>(port);
  so.api_key = api_key;
  so.served_model_name = served_name.empty() ? ModelId(model) : served_name;
  so.max_body_bytes = max_body;
  so.max_queue = max_queue;
  so.http_threads = static_cast<int>(http_threads);
  so.webui = !no_webui;
  auto server = server::Server::Create(engine->get(), so);
  if (!server.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", server.error().message().c_str());
    return 1;
  }
  if (Status s = (*server)->Start(); !s.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", s.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "kvforge: serving model '%s' (max_model_len %lld)\n",
               (*server)->model_id().c_str(), (long long)(*engine)->max_model_len());
  std::fprintf(stderr, "kvforge: listening on %s\n", (*server)->url().c_str());
  if (so.webui)
    std::fprintf(stderr, "kvforge: web page (chat and KV-cache inspector) at %s/\n",
                 (*server)->url().c_str());
  std::fflush(stderr);
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "kvforge: %s received, shutting down\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
  (*server)->Shutdown();
  server->reset();
  engine->reset();
  std::fprintf(stderr, "kvforge: stopped\n");
  return 0;
}

}  // namespace kvforge::cli
