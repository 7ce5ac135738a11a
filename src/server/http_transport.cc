// server/http_transport.cc — the only TU that includes httplib.h (see http_transport.h).
#include "server/http_transport.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "base/strings.h"
#include "server/peer_socket.h"

namespace kvforge::server {
namespace {

// The Debian build listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG is compiled into the
// library): a burst of clients overflows the accept queue and connections are dropped or reset.
// listen() on a listening socket only raises its backlog, so it is re-issued after binding.
template <class Base>
class Listener : public Base {
 public:
  using Base::Base;
  void RaiseBacklog(int backlog) {
    const socket_t fd = this->svr_sock_;
    if (fd != INVALID_SOCKET) ::listen(fd, backlog);
  }
};

constexpr int kListenBacklog = 1024;

void IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGPIPE, SIG_IGN); });
}

std::string RegexEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// Method, path and headers only (the pre- and post-routing hooks).
HttpRequest RequestLine(const httplib::Request& req) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  for (const auto& [k, v] : req.headers) r.headers.emplace_back(k, v);
  r.remote_addr = req.remote_addr;
  return r;
}

HttpRequest ToRequest(const httplib::Request& req, std::string body) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  for (const auto& [k, v] : req.headers) r.headers.emplace_back(k, v);
  r.body = std::move(body);
  r.remote_addr = req.remote_addr;
  // Found on first use: most handlers never ask.
  r.client_gone = [endpoints = ConnectionEndpoints{req.local_addr, req.local_port, req.remote_addr,
                                                   req.remote_port},
                   fd = -2]() mutable {
    if (fd == -2) fd = FindConnectionSocket(endpoints);
    return PeerHungUp(fd);
  };
  return r;
}

class DataSinkAdapter final : public StreamSink {
 public:
  explicit DataSinkAdapter(httplib::DataSink& sink) : sink_(sink) {}
  bool Write(std::string_view data) override {
    if (!ok_) return false;
    if (data.empty()) return true;  // an empty chunk would end the stream
    ok_ = sink_.is_writable() && sink_.write(data.data(), data.size());
    return ok_;
  }

 private:
  httplib::DataSink& sink_;
  bool ok_ = true;
};

void Apply(HttpResponse r, httplib::Response* res) {
  res->status = r.status;
  for (const auto& [k, v] : r.headers) res->set_header(k, v);
  if (r.stream) {
    auto producer = std::make_shared<std::function<void(StreamSink&)>>(std::move(r.stream));
    res->set_header("Cache-Control", "no-cache");
    res->set_header("X-Accel-Buffering", "no");
    res->set_chunked_content_provider(r.content_type, [producer](size_t, httplib::DataSink& sink) {
      DataSinkAdapter adapter(sink);
      (*producer)(adapter);
      sink.done();
      return true;
    });
  } else if (r.content_type.empty()) {
    res->body = std::move(r.body);  // no Content-Type (a 204)
  } else {
    res->set_content(r.body, r.content_type);
  }
}

}  // namespace

std::string FindHeader(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [k, v] : headers)
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  return "";
}

namespace {

// The TLS set-up of one server: read by the OpenSSL callbacks through the context's app data.
struct TlsFiles {
  std::string cert_file, key_file;
  HttpErrorBuilder error_builder;
  std::string error;  // why the certificate or key could not be loaded
};

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

// Writes a whole plain-HTTP response to a socket and lets the client read it: the unread rest of
// its request is drained (for a bounded time) before the caller closes, so that the close does
// not reset the connection under the response.
void AnswerInPlainHttp(int fd, const HttpResponse& r) {
  std::string out = base::StrFormat(
      "HTTP/1.1 %d Bad Request\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: "
      "close\r\n\r\n",
      r.status, r.content_type.c_str(), r.body.size());
  out += r.body;
  size_t sent = 0;
  for (int tries = 0; sent < out.size() && tries < 100; ++tries) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 100) <= 0) break;
    const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  char sink[4096];
  for (int tries = 0; tries < 20; ++tries) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) break;
    if (::recv(fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0) break;
  }
}

// OpenSSL fails the handshake of a plain HTTP request with SSL_R_HTTP_REQUEST; the info callback
// sees that failure while the socket is still open, and answers in plain HTTP.
void OnTlsInfo(const SSL* ssl, int where, int ret) {
  if ((where & SSL_CB_EXIT) == 0 || ret > 0) return;
  const unsigned long e = ERR_peek_last_error();
  if (ERR_GET_LIB(e) != ERR_LIB_SSL || ERR_GET_REASON(e) != SSL_R_HTTP_REQUEST) return;
  ERR_clear_error();  // never seen again by a later handshake on this thread
  auto* tls = static_cast<TlsFiles*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  const int fd = SSL_get_fd(ssl);
  if (tls == nullptr || fd < 0) return;
  HttpResponse r = tls->error_builder(
      400, "this server speaks HTTPS only: the request came in plain HTTP; use https://");
  r.status = 400;
  AnswerInPlainHttp(fd, r);
}

// The server context: the certificate chain and key from their files, TLS 1.2 at least.
bool SetUpTls(SSL_CTX& ctx, TlsFiles* tls) {
  const TlsFiles& o = *tls;
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(&ctx, o.cert_file.c_str()) != 1) {
    tls->error = "cannot load the TLS certificate " + o.cert_file + ": " + OpenSslError();
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(&ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    tls->error = "cannot load the TLS private key " + o.key_file + ": " + OpenSslError();
    return false;
  }
  if (SSL_CTX_check_private_key(&ctx) != 1) {
    tls->error = "the TLS private key " + o.key_file + " does not match the certificate " +
                      o.cert_file + ": " + OpenSslError();
    return false;
  }
  SSL_CTX_set_app_data(&ctx, tls);
  SSL_CTX_set_info_callback(&ctx, OnTlsInfo);
  return true;
}

template <class Base, class Impl, class... A>
void MakeListener(Impl* impl, A&&... args) {
  auto listener = std::make_unique<Listener<Base>>(std::forward<A>(args)...);
  Listener<Base>* raw = listener.get();
  impl->raise_backlog = [raw](int backlog) { raw->RaiseBacklog(backlog); };
  impl->svr = std::move(listener);
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpErrorBuilder error_builder;
  std::unique_ptr<httplib::Server> svr;  // plain or TLS
  std::function<void(int)> raise_backlog;
  TlsFiles tls;
  std::thread thread;
  std::mutex mu;
  bool started = false;  // guarded by mu
  bool stopped = false;  // guarded by mu
  std::atomic<bool> listen_returned{false};
  int port = -1;

  void SetError(int status, const std::string& message, httplib::Response* res) {
    HttpResponse r = error_builder(status, message);
    r.status = status;
    Apply(std::move(r), res);
  }
};


HttpServer::HttpServer(HttpServerOptions options, std::vector<HttpRoute> routes,
                       HttpErrorBuilder error_builder)
    : impl_(std::make_unique<Impl>()) {
  Impl* impl = impl_.get();
  impl->options = std::move(options);
  impl->error_builder = std::move(error_builder);
  const HttpServerOptions& o = impl->options;
  if (!o.tls_cert_file.empty() || !o.tls_key_file.empty()) {
    impl->tls = {o.tls_cert_file, o.tls_key_file, impl->error_builder, ""};
    if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
      impl->tls.error = "TLS needs both a certificate file and a key file";
      MakeListener<httplib::Server>(impl);
    } else {
      TlsFiles* tls = &impl->tls;
      MakeListener<httplib::SSLServer>(impl, [tls](SSL_CTX& ctx) { return SetUpTls(ctx, tls); });
    }
  } else {
    MakeListener<httplib::Server>(impl);
  }
  httplib::Server& svr = *impl->svr;
  if (o.intercept)
    svr.set_pre_routing_handler([impl](const httplib::Request& req, httplib::Response& res) {
      std::optional<HttpResponse> r = impl->options.intercept(RequestLine(req));
      if (!r) return httplib::Server::HandlerResponse::Unhandled;
      Apply(std::move(*r), &res);
      return httplib::Server::HandlerResponse::Handled;
    });
  if (o.response_headers)
    svr.set_post_routing_handler([impl](const httplib::Request& req, httplib::Response& res) {
      for (const auto& [k, v] : impl->options.response_headers(RequestLine(req)))
        res.set_header(k, v);
    });
  const size_t threads = static_cast<size_t>(std::max(1, o.threads));
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  svr.set_payload_max_length(o.max_body_bytes);
  svr.set_read_timeout(o.read_timeout_s, 0);
  svr.set_write_timeout(o.write_timeout_s, 0);
  svr.set_keep_alive_timeout(o.keep_alive_timeout_s);
  svr.set_keep_alive_max_count(static_cast<size_t>(std::max(1, o.keep_alive_max_count)));
  svr.set_tcp_nodelay(true);

  // Transport-level statuses (no route, body too large, unreadable request): the API's error
  // shape, unless a handler already produced a body.
  svr.set_error_handler(httplib::Server::HandlerWithResponse(
      [impl](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty() || res.content_provider_)
          return httplib::Server::HandlerResponse::Unhandled;
        std::string message;
        switch (res.status) {
          case 404:
            message = "no route for " + req.method + " " + req.path;
            break;
          case 413:
            message = base::StrFormat("the request body exceeds the %zu-byte limit",
                                      impl->options.max_body_bytes);
            break;
          case 414:
            message = "the request URI is too long";
            break;
          default:
            message = "the request could not be read";
            break;
        }
        impl->SetError(res.status, message, &res);
        return httplib::Server::HandlerResponse::Handled;
      }));
  svr.set_exception_handler(
      [impl](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = std::string("internal error: ") + e.what();
        } catch (...) {
        }
        res.body.clear();
        res.headers.clear();
        impl->SetError(500, what, &res);
      });

  std::set<std::string> get_paths, post_paths;
  for (HttpRoute& route : routes) {
    const std::string pattern = RegexEscape(route.path);
    auto handler = std::make_shared<HttpHandler>(std::move(route.handler));
    if (route.method == "GET") {
      get_paths.insert(route.path);
      svr.Get(pattern, [handler](const httplib::Request& req, httplib::Response& res) {
        Apply((*handler)(ToRequest(req, "")), &res);
      });
    } else if (route.method == "POST") {
      post_paths.insert(route.path);
      svr.Post(pattern, [impl, handler](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
        if (req.is_multipart_form_data()) {
          impl->SetError(415, "multipart bodies are not supported; send application/json", &res);
          return;
        }
        std::string body;
        bool too_big = false;
        const size_t limit = impl->options.max_body_bytes;
        const bool ok = reader([&](const char* data, size_t len) {
          if (body.size() + len > limit) {
            too_big = true;
            return false;
          }
          body.append(data, len);
          return true;
        });
        if (too_big || res.status == 413) {
          impl->SetError(413, base::StrFormat("the request body exceeds the %zu-byte limit", limit),
                         &res);
          res.set_header("Connection", "close");
          return;
        }
        if (!ok) {
          impl->SetError(400, "the request body could not be read", &res);
          return;
        }
        Apply((*handler)(ToRequest(req, std::move(body))), &res);
      });
    }
  }
  // A known path with the wrong method: 405, not 404.
  for (const std::string& path : post_paths)
    if (!get_paths.count(path))
      svr.Get(RegexEscape(path), [impl](const httplib::Request& req, httplib::Response& res) {
        impl->SetError(405, "use POST for " + req.path, &res);
        res.set_header("Allow", "POST");
      });
  for (const std::string& path : get_paths)
    if (!post_paths.count(path))
      svr.Post(RegexEscape(path), [impl](const httplib::Request& req, httplib::Response& res) {
        impl->SetError(405, "use GET for " + req.path, &res);
        res.set_header("Allow", "GET");
      });
}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  IgnoreSigpipe();
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->started) return Status::InvalidArgument("the HTTP server was already started");
  const HttpServerOptions& o = impl_->options;
  if (!impl_->tls.error.empty()) return Status::InvalidArgument(impl_->tls.error);
  if (!impl_->svr->is_valid()) return Status::InvalidArgument("the HTTP server could not be set up");
  int port = -1;
  try {
    if (o.port == 0)
      port = impl_->svr->bind_to_any_port(o.host);
    else if (impl_->svr->bind_to_port(o.host, o.port))
      port = o.port;
  } catch (const std::exception& e) {
    return Status::Unavailable(
        base::StrFormat("cannot listen on %s:%d: %s", o.host.c_str(), o.port, e.what()));
  }
  if (port > 0) impl_->raise_backlog(kListenBacklog);
  if (port <= 0)
    return Status::Unavailable(base::StrFormat(
        "cannot listen on %s:%d (address in use or not local)", o.host.c_str(), o.port));
  impl_->port = port;
  impl_->started = true;
  Impl* impl = impl_.get();
  impl_->thread = std::thread([impl] {
    try {
      impl->svr->listen_after_bind();
    } catch (...) {
    }
    impl->listen_returned = true;
  });
  // stop() is a no-op until the accept loop runs, so Start returns only once it does.
  for (int i = 0; i < 10000 && !impl_->svr->is_running() && !impl_->listen_returned; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!impl_->svr->is_running()) return Status::Unavailable("the HTTP accept loop did not start");
  return Status::Ok();
}

int HttpServer::port() const { return impl_->port; }

bool HttpServer::tls() const { return !impl_->options.tls_cert_file.empty(); }

void HttpServer::Stop() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->started || impl_->stopped) return;
  impl_->stopped = true;
  impl_->svr->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

// ---------------------------------------------------------------------------------------------
// Client

struct HttpClient::Impl {
  explicit Impl(const std::string& url) : cli(url) {}
  httplib::Client cli;
};

HttpClient::HttpClient(const std::string& base_url, HttpClientOptions options)
    : impl_(std::make_unique<Impl>(base_url)) {
  IgnoreSigpipe();
  impl_->cli.set_connection_timeout(options.connect_timeout_s, 0);
  impl_->cli.set_read_timeout(options.read_timeout_s, 0);
  impl_->cli.set_write_timeout(options.write_timeout_s, 0);
}

HttpClient::~HttpClient() = default;

namespace {

httplib::Headers ToHeaders(const HttpHeaders& headers) {
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  return h;
}

HttpResult FromResult(const httplib::Result& r) {
  HttpResult out;
  if (!r) {
    out.error = httplib::to_string(r.error());
    return out;
  }
  out.ok = true;
  out.status = r->status;
  out.body = r->body;
  for (const auto& [k, v] : r->headers) out.headers.emplace_back(k, v);
  return out;
}

}  // namespace

HttpResult HttpClient::Get(const std::string& path, const HttpHeaders& headers) {
  try {
    return FromResult(impl_->cli.Get(path, ToHeaders(headers)));
  } catch (const std::exception& e) {
    HttpResult out;
    out.error = e.what();
    return out;
  }
}

HttpResult HttpClient::Post(const std::string& path, const std::string& body,
                            const HttpHeaders& headers, const std::string& content_type) {
  try {
    return FromResult(impl_->cli.Post(path, ToHeaders(headers), body, content_type));
  } catch (const std::exception& e) {
    HttpResult out;
    out.error = e.what();
    return out;
  }
}

HttpResult HttpClient::PostStream(const std::string& path, const std::string& body,
                                  const HttpHeaders& headers,
                                  const std::function<bool(std::string_view)>& on_data) {
  HttpResult out;
  try {
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.headers = ToHeaders(headers);
    req.set_header("Content-Type", "application/json");
    req.set_header("Accept", "text/event-stream");
    req.body = body;
    int status = 0;
    req.response_handler = [&](const httplib::Response& res) {
      status = res.status;
      for (const auto& [k, v] : res.headers) out.headers.emplace_back(k, v);
      return true;
    };
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      if (status < 200 || status >= 300) {
        out.body.append(data, len);
        return true;
      }
      return on_data(std::string_view(data, len));
    };
    httplib::Result r = impl_->cli.send(req);
    out.status = status;
    if (!r) {
      out.error = httplib::to_string(r.error());
      return out;
    }
    out.ok = true;
    out.status = r->status;
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace kvforge::server
