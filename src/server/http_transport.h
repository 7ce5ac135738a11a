// server/http_transport.h — HTTP/1.1 server and client over cpp-httplib, with plain types.
//
// http_transport.cc is the only TU that includes httplib.h. The server does framing only: it
// reads a request (refusing bodies over max_body_bytes with 413), hands it to the handler of the
// matching route, and writes the HttpResponse, either whole or streamed with chunked transfer
// encoding. Status codes the transport produces itself (404 no route, 405 wrong method, 413 body
// too large, 400 unreadable body, 415 multipart, 500 handler exception) get their body from the
// error builder, so that every error has the API's JSON shape.
//
// Threads: `threads` workers serve connections (one connection, with its keep-alive requests, at
// a time per worker); a handler or stream producer blocks its worker. Stop() stops accepting and
// joins the workers, so running streams must be ended (by the caller) for it to return.
// Both the server and the client ignore SIGPIPE process-wide (the Debian build of httplib writes
// without MSG_NOSIGNAL): a vanished peer is a failed write, not a dead process.
//
// Thread-safety: HttpServer methods may be called from any thread; handlers run concurrently on
// the workers. An HttpClient is one connection's worth of state: one thread at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// Case-insensitive lookup; "" when absent.
std::string FindHeader(const HttpHeaders& headers, std::string_view name);

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  HttpHeaders headers;
  std::string body;
  std::string remote_addr;
  // True once the client closed its connection (peer_socket.h); callable only while the
  // handler runs. Null for requests that did not come over a socket (tests building requests).
  std::function<bool()> client_gone;
  std::string Header(std::string_view name) const { return FindHeader(headers, name); }
};

// Where a streamed response body goes.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Sends `data` to the client now (blocking up to the write timeout while the client does not
  // read). Returns false once the client is gone or too slow; the producer should stop then.
  virtual bool Write(std::string_view data) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HttpHeaders headers;
  // When set, the body is streamed: after the status line and headers are sent, `stream` runs
  // once on the worker thread and writes the body through the sink. It is destroyed without
  // having run when the headers cannot be sent.
  std::function<void(StreamSink&)> stream;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;
// Builds the response for a status the transport produces itself.
using HttpErrorBuilder = std::function<HttpResponse(int status, const std::string& message)>;

struct HttpRoute {
  std::string method;  // "GET" or "POST" (HEAD is served by GET routes)
  std::string path;    // exact path
  HttpHandler handler;
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: an ephemeral port (see HttpServer::port)
  size_t max_body_bytes = 4u << 20;
  int threads = 64;
  int read_timeout_s = 30;   // per read of a request
  int write_timeout_s = 30;  // per write of a response (a client that stops reading)
  int keep_alive_timeout_s = 5;
  int keep_alive_max_count = 100;
  // HTTPS when both are set: a PEM certificate (chain) file and its private key file. A plain
  // HTTP request to the TLS port is answered 400 in plain HTTP, saying to use https://.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Runs before routing: a response it returns is sent instead (CORS preflights).
  std::function<std::optional<HttpResponse>(const HttpRequest&)> intercept;
  // Headers added to every response, transport errors included (CORS).
  std::function<HttpHeaders(const HttpRequest&)> response_headers;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, std::vector<HttpRoute> routes,
             HttpErrorBuilder error_builder);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket (kUnavailable when the address is taken or invalid; kInvalidArgument
  // naming the file when the TLS certificate or key cannot be loaded), then serves on background
  // threads. Returns once requests can be accepted.
  Status Start();
  // The bound port (after Start).
  int port() const;
  bool tls() const;
  // Stops accepting and joins every worker (running handlers finish first). Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct HttpClientOptions {
  int connect_timeout_s = 10;
  int read_timeout_s = 600;
  int write_timeout_s = 60;
};

struct HttpResult {
  bool ok = false;    // a response arrived (any status)
  std::string error;  // transport failure when !ok ("Connection", "Read", "Canceled", ...)
  int status = 0;
  std::string body;  // PostStream: only non-2xx bodies are collected here
  HttpHeaders headers;
};

class HttpClient {
 public:
  // `base_url`: "http://host:port" (or https:// where the library has TLS).
  HttpClient(const std::string& base_url, HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResult Get(const std::string& path, const HttpHeaders& headers = {});
  HttpResult Post(const std::string& path, const std::string& body, const HttpHeaders& headers = {},
                  const std::string& content_type = "application/json");
  // Streams a 2xx response body to `on_data` piece by piece as it arrives; returning false closes
  // the connection at once (the result is then !ok with error "Canceled").
  HttpResult PostStream(const std::string& path, const std::string& body,
                        const HttpHeaders& headers,
                        const std::function<bool(std::string_view)>& on_data);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvforge::server
