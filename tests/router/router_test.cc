// The router over real loopback HTTP, with small upstreams written on raw sockets so that each
// failure is exact: a worker that refuses connections after passing its health check (the request
// goes to the next worker), one that dies after sending part of a reply (a 502, or in a stream an
// SSE error event after what was already sent), none healthy (503), and pass-through of status,
// body and content type. Real `kvforge serve` workers are exercised in tests/cli/cli_test.sh.
#include "router/router.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

namespace kvforge::router {
namespace {

// A one-thread HTTP/1.0-style upstream: GET /health answers 200; a POST gets `post_reply`
// verbatim, then the connection is reset when `reset_after_post` (a worker dying mid-reply).
class RawUpstream {
 public:
  RawUpstream(std::string post_reply, bool reset_after_post)
      : reply_(std::move(post_reply)), reset_(reset_after_post) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~RawUpstream() { Close(); }
  // Stops listening: connections are refused from now on.
  void Close() {
    if (fd_ >= 0) {
      shutdown(fd_, SHUT_RDWR);
      close(fd_);
      fd_ = -1;
    }
    if (thread_.joinable()) thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int posts() const { return posts_; }

 private:
  void Serve() {
    for (;;) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      // Headers, then as many body bytes as Content-Length says.
      while (req.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      const size_t head = req.find("\r\n\r\n");
      size_t want = 0;
      if (const size_t cl = req.find("Content-Length: "); cl != std::string::npos)
        want = std::stoul(req.substr(cl + 16));
      while (head != std::string::npos && req.size() < head + 4 + want) {
        const ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      if (req.rfind("GET /health", 0) == 0) {
        const std::string ok =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
            "Connection: close\r\n\r\n{}";
        (void)!write(c, ok.data(), ok.size());
        close(c);
        continue;
      }
      ++posts_;
      (void)!write(c, reply_.data(), reply_.size());
      if (reset_) {
        linger l{1, 0};  // close with RST: the peer sees a reset, not a clean end
        setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
      }
      close(c);
    }
  }

  std::string reply_;
  bool reset_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> posts_{0};
  std::thread thread_;
};

const std::string kOkJson = "{\"choices\":[{\"text\":\"hi\"}]}";
std::string OkReply() {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(kOkJson.size()) + "\r\nConnection: close\r\n\r\n" + kOkJson;
}
// Headers and one chunk of an event stream, then (with reset) nothing more.
std::string HalfStream() {
  const std::string event = "data: {\"choices\":[{\"text\":\"par\"}]}\n\n";
  char size[16];
  std::snprintf(size, sizeof(size), "%zx", event.size());
  return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: "
         "chunked\r\n\r\n" +
         std::string(size) + "\r\n" + event + "\r\n";
}

struct Front {
  std::unique_ptr<Router> router;
  std::unique_ptr<server::HttpServer> http;
  std::string url;
};

Front StartRouter(std::vector<std::string> workers, RoutePolicy policy) {
  RouterOptions o;
  o.workers = std::move(workers);
  o.route.policy = policy;
  o.health_interval_ms = 60000;  // the start-up check only: the tests decide what is down
  o.connect_timeout_s = 2;
  o.upstream_timeout_s = 10;
  Front f;
  Result<std::unique_ptr<Router>> r = Router::Create(o);
  EXPECT_TRUE(r.ok());
  f.router = std::move(*r);
  f.router->StartHealthChecks();
  server::HttpServerOptions so;
  so.port = 0;
  so.threads = 8;
  f.http = std::make_unique<server::HttpServer>(so, f.router->Routes(), f.router->ErrorBuilder());
  EXPECT_TRUE(f.http->Start().ok());
  f.url = "http://127.0.0.1:" + std::to_string(f.http->port());
  return f;
}

const std::string kBody = "{\"prompt\":\"Once upon a time\",\"max_tokens\":4}";
const std::string kStreamBody =
    "{\"prompt\":\"Once upon a time\",\"max_tokens\":4,\"stream\":true}";

TEST(Router, PassesRepliesThroughAndNamesTheWorker) {
  RawUpstream up(OkReply(), false);
  Front f = StartRouter({up.url()}, RoutePolicy::kCacheAware);
  server::HttpClient client(f.url);
  const server::HttpResult r = client.Post("/v1/completions", kBody);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kOkJson);
  EXPECT_EQ(server::FindHeader(r.headers, "x-kvforge-worker"), up.url());
  const server::HttpResult h = client.Get("/health");
  EXPECT_EQ(h.status, 200);
  const server::HttpResult w = client.Get("/workers");
  EXPECT_NE(w.body.find("\"requests\":1"), std::string::npos) << w.body;
  const server::HttpResult m = client.Get("/metrics");
  EXPECT_NE(m.body.find("kvforge_router_requests_total{worker=\"" + up.url() + "\"} 1"),
            std::string::npos)
      << m.body;
}

TEST(Router, ARefusedConnectionGoesToTheNextWorker) {
  RawUpstream a(OkReply(), false), b(OkReply(), false);
  Front f = StartRouter({a.url(), b.url()}, RoutePolicy::kRoundRobin);
  a.Close();  // passed its health check, then died
  server::HttpClient client(f.url);
  for (int i = 0; i < 3; ++i) {
    const server::HttpResult r = client.Post("/v1/completions", kBody);
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.status, 200) << "request " << i << ": " << r.body;
    EXPECT_EQ(server::FindHeader(r.headers, "x-kvforge-worker"), b.url());
  }
  EXPECT_EQ(b.posts(), 3);
  const std::vector<WorkerReport> ws = f.router->Workers();
  EXPECT_FALSE(ws[0].healthy) << "the refusing worker is taken out";
  EXPECT_TRUE(ws[1].healthy);
}

TEST(Router, AWorkerDyingMidReplyIsA502) {
  RawUpstream up(HalfStream(), true);
  Front f = StartRouter({up.url()}, RoutePolicy::kCacheAware);
  server::HttpClient client(f.url);
  const server::HttpResult r = client.Post("/v1/completions", kBody);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 502);
  EXPECT_NE(r.body.find("upstream_error"), std::string::npos) << r.body;
  EXPECT_EQ(up.posts(), 1) << "sent once: it may have started, so it is not retried";
}

TEST(Router, AStreamCutMidwayEndsWithAnErrorEvent) {
  RawUpstream up(HalfStream(), true);
  Front f = StartRouter({up.url()}, RoutePolicy::kCacheAware);
  server::HttpClient client(f.url);
  std::string got;
  const server::HttpResult r =
      client.PostStream("/v1/completions", kStreamBody, {}, [&](std::string_view d) {
        got.append(d);
        return true;
      });
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200);
  const size_t part = got.find("\"par\"");
  const size_t error = got.find("upstream_error");
  ASSERT_NE(part, std::string::npos) << got;
  ASSERT_NE(error, std::string::npos) << "the client must learn the stream broke: " << got;
  EXPECT_LT(part, error);
}

TEST(Router, NoHealthyWorkerIs503) {
  RawUpstream gone(OkReply(), false);
  const std::string url = gone.url();
  gone.Close();
  Front f = StartRouter({url}, RoutePolicy::kCacheAware);
  server::HttpClient client(f.url);
  EXPECT_EQ(client.Get("/health").status, 503);
  const server::HttpResult r = client.Post("/v1/completions", kBody);
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("no healthy worker"), std::string::npos) << r.body;
  std::string got;
  client.PostStream("/v1/completions", kStreamBody, {}, [&](std::string_view d) {
    got.append(d);
    return true;
  });
  EXPECT_NE(got.find("no healthy worker"), std::string::npos) << got;
}

TEST(Router, BadOptionsAreRefused) {
  RouterOptions o;
  EXPECT_FALSE(Router::Create(o).ok()) << "no workers";
  o.workers = {"127.0.0.1:8000"};
  EXPECT_FALSE(Router::Create(o).ok()) << "not a URL";
  o.workers = {"http://127.0.0.1:8000"};
  o.route.cache_threshold = 2;
  EXPECT_FALSE(Router::Create(o).ok());
}

}  // namespace
}  // namespace kvforge::router
