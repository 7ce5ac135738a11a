// router/router.h — `kvforge route`: one OpenAI-compatible front for N `kvforge serve` workers.
//
// Requests (/v1/completions, /v1/chat/completions, streaming included) are passed through
// unchanged to the worker the policy picks (route_policy.h) from the prompt's cached-prefix
// estimate (locality_index.h) and the in-flight counts; the reply comes back as the worker wrote
// it, with an `x-kvforge-worker` header naming the worker. A health checker GETs each worker's
// /health every interval: a worker that fails it takes no new requests until it passes again.
// A worker that refuses the connection is marked down and the request goes to the next one (it
// never reached the worker); one that fails after the request was sent gets the client a 502
// (or, in a stream, an SSE error event), since it may have started generating. Router endpoints:
// /health (200 while a worker is healthy), /workers (JSON) and /metrics (Prometheus).
// Thread-safety: handlers run concurrently; the state is behind one mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvforge/status.h"
#include "router/locality_index.h"
#include "router/route_policy.h"
#include "router/router_codec.h"
#include "server/http_transport.h"

namespace kvforge::router {

struct RouterOptions {
  std::vector<std::string> workers;  // base URLs, "http://host:port"
  RouteOptions route;
  int health_interval_ms = 500;
  int health_timeout_s = 2;
  int connect_timeout_s = 5;
  int upstream_timeout_s = 600;  // a worker's reply may take this long
  size_t block_chars = 64;       // locality granularity
  size_t max_keys = 1 << 20;     // locality index bound (LRU)
};

class Router {
 public:
  static Result<std::unique_ptr<Router>> Create(RouterOptions options);
  ~Router();  // stops the health checker

  std::vector<server::HttpRoute> Routes();
  // The error shape for statuses the transport raises itself.
  server::HttpErrorBuilder ErrorBuilder() const;
  // Checks every worker once now (the start-up check), then keeps checking in the background.
  void StartHealthChecks();
  std::vector<WorkerReport> Workers() const;
  // Shutting down: running streams end now with an SSE error event (instead of running to the
  // end of their generation), so the HTTP server's Stop returns soon.
  void BeginShutdown() { shutting_down_ = true; }

 private:
  explicit Router(RouterOptions options);
  using Worker = WorkerReport;  // the state kept per worker is what /workers reports
  server::HttpResponse Forward(const server::HttpRequest& req);
  server::HttpResponse Stream(const server::HttpRequest& req, const RoutingKey& key);
  server::HttpResponse Passthrough(const server::HttpRequest& req, bool any_worker);
  // Picks a worker for `text` (excluding `tried`), counts it in flight; -1: none left.
  int Pick(const std::string& text, const std::vector<int>& tried);
  void Done(int worker, bool failed, bool refused);
  void CheckAll();
  void HealthLoop();
  std::string Metrics() const;
  server::HttpHeaders UpstreamHeaders(const server::HttpRequest& req) const;

  const RouterOptions options_;
  mutable std::mutex mu_;
  std::vector<Worker> workers_;
  LocalityIndex index_;
  uint64_t turn_ = 0;
  int64_t no_worker_ = 0;  // requests refused for want of a healthy worker
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::atomic<bool> shutting_down_{false};
  std::thread health_;
};

}  // namespace kvforge::router
