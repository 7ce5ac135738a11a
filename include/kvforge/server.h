// kvforge/server.h — the OpenAI-compatible HTTP server over an AsyncEngine (src/server).
//
//   auto engine = kvforge::AsyncEngine::Create(config);
//   auto server = kvforge::server::Server::Create(engine->get(), {.port = 0});
//   (*server)->Start();   // serving; (*server)->port() is the bound port
//   ...
//   (*server)->Shutdown();  // 503 for new requests, in-flight requests aborted, threads joined
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (both also as Server-Sent Events
// with "stream": true), GET /v1/models, GET /health, GET /metrics (Prometheus), POST /tokenize,
// POST /detokenize; Anthropic's Messages API, POST /v1/messages (streamed as its typed events)
// and POST /v1/messages/count_tokens, and OpenAI's Responses API, POST /v1/responses (stateless;
// streamed as its typed events), both over the chat completions pipeline; the web page's GET /
// (unless webui is off), GET /v1/kvforge/kv and GET /v1/kvforge/history (server/inspector.h).
// See docs/server.md for the fields, errors and metric names.
//
// Requests are parsed and validated on the HTTP worker threads (JSON confined to the codec),
// chat messages rendered with the chat template and tokenized there, then handed to the engine's
// single thread. A streaming client that disconnects has its request aborted (its KV blocks are
// freed); at most (max_num_seqs + max_queue) sequences (prompts x n) are admitted at once, the
// rest get 429.
//
// Thread-safety: Start/Shutdown from one controlling thread; handlers run on the HTTP workers.
// The engine must outlive the Server (the Server does not own it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvforge/llm.h"
#include "kvforge/status.h"

namespace kvforge::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                // 0: ephemeral (read port() after Start)
  std::string api_key;            // non-empty: required as "Authorization: Bearer KEY"
  std::string served_model_name;  // the id in /v1/models and "model"; empty: "kvforge"
  std::string chat_template;      // template source overriding the model's; empty: the model's,
                                  // else chat::kDefaultChatTemplate
  // Tool calls in chat replies: "hermes", "llama3_json", "mistral" or "deepseek_v3" (vLLM's
  // --tool-call-parser names); empty: the format the chat template shows, else hermes.
  std::string tool_call_parser;
  // "deepseek_r1" or "qwen3": <think>...</think> in replies becomes reasoning_content, and
  // constraints apply after it; empty: replies are read as they are.
  std::string reasoning_parser;
  size_t max_body_bytes = 4u << 20;
  int64_t max_queue = 128;         // sequences that may wait beyond the engine's max_num_seqs
  int http_threads = 0;            // 0: max_num_seqs + max_queue + 16, within [16, 1024]
  int stream_keepalive_ms = 2000;  // SSE comment sent after this long without output
  int keep_alive_timeout_s = 5;    // idle HTTP keep-alive connections
  int write_timeout_s = 30;        // a client that stops reading is dropped after this long
  bool webui = true;               // GET / serves the chat playground and KV inspector page
  int history_interval_ms = 1000;  // the inspector's chart samples (GET /v1/kvforge/history)
  // HTTPS (vLLM's --ssl-certfile/--ssl-keyfile): PEM files; both or neither. Loaded at Start,
  // which fails naming the file that cannot be read or does not match.
  std::string ssl_certfile;
  std::string ssl_keyfile;
  // CORS (vLLM's --allowed-origins/-methods/-headers, --allow-credentials): browser pages from
  // these origins ("scheme://host:port", or "*") may call the API; empty: CORS off (no headers,
  // preflights 404). Empty methods: GET, POST, OPTIONS; empty headers: any ("*").
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_methods;
  std::vector<std::string> allowed_headers;
  bool allow_credentials = false;
};

// A CORS flag's list (--allowed-origins and the like): '["a", "b"]' or a,b; "" or []: empty.
// Empty entries and quotes inside entries are refused, naming `flag`.
Result<std::vector<std::string>> ParseCorsFlagList(std::string_view text, std::string_view flag);

class Server {
 public:
  // Fails when the chat template does not parse or an option is out of range.
  static Result<std::unique_ptr<Server>> Create(AsyncEngine* engine, const ServerOptions& options);
  ~Server();  // Shutdown()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts serving on background threads (kUnavailable when the port is taken).
  Status Start();
  int port() const;
  std::string url() const;  // "http://HOST:PORT" ("https://" with TLS)
  const std::string& model_id() const;
  // Refuses new requests (503), aborts every in-flight request, stops accepting connections and
  // joins the HTTP threads; waits until the engine has delivered every aborted request's final
  // output. Idempotent.
  void Shutdown();

 private:
  struct State;
  explicit Server(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kvforge::server
