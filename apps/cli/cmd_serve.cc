// kvforge serve — the OpenAI-compatible HTTP server (src/server) over the batching engine.
//
// SIGINT and SIGTERM are blocked in every thread and taken by the main thread with sigwait: the
// server then refuses new requests, aborts the running ones, stops accepting and exits 0.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "commands.h"
#include "config_file.h"
#include "engine_flags.h"
#include "flags.h"
#include "kvforge/llm.h"
#include "kvforge/server.h"

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

// A CORS flag's list: '["a", "b"]' or a,b.
bool ParseList(const std::string& text, const char* flag, std::vector<std::string>* out) {
  auto list = server::ParseCorsFlagList(text, flag);
  if (!list.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", list.error().message().c_str());
    return false;
  }
  *out = std::move(*list);
  return true;
}

// Checks the TLS files before the model is loaded (Start loads them); -1: go on, else the exit
// code.
int SetTlsAndCors(const std::string& cert, const std::string& key, const std::string& origins,
                  const std::string& methods, const std::string& headers, bool credentials,
                  server::ServerOptions* so) {
  if (cert.empty() != key.empty()) {
    std::fprintf(stderr, "kvforge: TLS needs both --ssl-certfile and --ssl-keyfile\n");
    return 2;
  }
  for (const std::string* f : {&cert, &key})
    if (!f->empty() && !std::ifstream(*f, std::ios::binary)) {
      std::fprintf(stderr, "kvforge: cannot read %s\n", f->c_str());
      return 2;
    }
  so->ssl_certfile = cert;
  so->ssl_keyfile = key;
  if (!ParseList(origins, "allowed-origins", &so->allowed_origins) ||
      !ParseList(methods, "allowed-methods", &so->allowed_methods) ||
      !ParseList(headers, "allowed-headers", &so->allowed_headers))
    return 2;
  so->allow_credentials = credentials;
  return -1;
}

}  // namespace

// Decode-priority chunking's target for `kvforge serve`, chosen from measurement (ADR 0012).
constexpr double kServeMaxItlMs = 200;
// ... and the first-token latency at which it yields to a waiting prompt (#46): without it, at
// the 1.1B shape (prompt tokens ~10 ms each) the 200 ms target left new prompts a few tokens a
// step and served no request within a 2 s TTFT under load (goodput 0 where llama-server's is
// 0.3 req/s, BENCHMARKS.md). Half of the usual 2 s interactive TTFT objective: with the lift at
// 2000 ms the p90 TTFT sat on the objective (1969 / 2092 ms at 0.2 / 0.3 req/s, goodput 0.2
// against llama-server's 0.3); the prediction covers the prefill, not the queueing around it.
constexpr double kServeMaxTtftMs = 1000;

int ServeMain(const Args& args) {
  std::string host = "127.0.0.1", api_key, chat_template_file, served_name, tool_call_parser,
              reasoning_parser, config_file, ssl_certfile, ssl_keyfile, allowed_origins,
              allowed_methods = "GET,POST,OPTIONS", allowed_headers = "*";
  bool allow_credentials = false;
  int64_t port = 8000, max_queue = 128, http_threads = 0;
  bool no_webui = false;
  uint64_t max_body = 4u << 20;
  EngineConfig cfg;
  // Serving is timing-dependent anyway; the library's default (0) keeps offline runs reproducible.
  cfg.max_itl_ms = kServeMaxItlMs;
  cfg.max_ttft_ms = kServeMaxTtftMs;
  FlagParser p(
      "serve",
      "Serve the OpenAI-compatible API (/v1/completions, /v1/chat/completions, /v1/models, "
      "/health,\n"
      "/metrics, /tokenize, /detokenize) over the continuous-batching engine, and a web page at /. "
      "The bound address "
      "is\n"
      "printed on stderr; SIGINT/SIGTERM shut down gracefully (in-flight requests are aborted).");
  p.Section("server");
  p.AddString("served-model-name", &served_name,
              "model id in the API (default: the file name without .gguf)");
  p.AddString("host", &host, "address to listen on");
  p.AddInt("port", &port, "TCP port (0: an ephemeral port)");
  p.AddString("api-key", &api_key,
              "require 'Authorization: Bearer KEY' (not for /health and /metrics)");
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
  p.Section("TLS and CORS");
  p.AddString("ssl-certfile", &ssl_certfile, "PEM certificate (chain) file: serve HTTPS");
  p.AddString("ssl-keyfile", &ssl_keyfile, "PEM private key file of --ssl-certfile");
  p.AddAlias("ssl-cert-file", "ssl-certfile");  // llama-server's spellings
  p.AddAlias("ssl-key-file", "ssl-keyfile");
  p.AddString("allowed-origins", &allowed_origins,
              "browser origins allowed to call the API (CORS), e.g. "
              "'[\"https://app.example.com\"]' or a,b; '*': any (default: CORS off)");
  p.AddString("allowed-methods", &allowed_methods, "CORS: methods allowed ('*': any)");
  p.AddString("allowed-headers", &allowed_headers, "CORS: request headers allowed ('*': any)");
  p.AddBool("allow-credentials", &allow_credentials, "CORS: allow cookies and Authorization");
  p.Section("config file");
  p.AddString("config", &config_file,
              "YAML file of flag values (keys: the flag names without --); flags on the command "
              "line override it");
  AddEngineFlags(p, &cfg);
  auto all_args = WithConfigFile(p, args);
  if (!all_args.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", all_args.error().message().c_str());
    return 2;
  }
  if (int rc = HandleParse(p, *all_args); rc >= 0) return rc;
  if (port < 0 || port > 65535) {
    std::fprintf(stderr, "kvforge: --port must be in 0..65535\n");
    return 2;
  }
  if (max_queue < 0 || http_threads < 0 || http_threads > 4096 || max_body < 64) {
    std::fprintf(stderr,
                 "kvforge: --max-queue and --http-threads (at most 4096) must not be negative; "
                 "--max-body-bytes at least 64\n");
    return 2;
  }
  server::ServerOptions so;
  if (int rc = SetTlsAndCors(ssl_certfile, ssl_keyfile, allowed_origins, allowed_methods,
                             allowed_headers, allow_credentials, &so);
      rc >= 0)
    return rc;
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
  so.served_model_name = served_name.empty() ? ModelId(cfg.model) : served_name;
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
