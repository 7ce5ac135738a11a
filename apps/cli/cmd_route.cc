// kvforge route — one OpenAI-compatible front for several `kvforge serve` workers, routing each
// request to the worker most likely to hold its prefix's KV unless that worker is overloaded
// (src/router). SIGINT/SIGTERM stop it: running streams end with an error event, other requests
// finish; a second signal exits at once.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "flags.h"
#include "router/router.h"

namespace kvforge::cli {

namespace {

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    std::string part = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

}  // namespace

int RouteMain(const Args& args) {
  std::string workers, host = "127.0.0.1", policy = "cache_aware";
  int64_t port = 8000, health_ms = 500, balance_abs = 16, http_threads = 256, block_chars = 64;
  double threshold = 0.5, balance_rel = 1.5;
  FlagParser p("route",
               "Route the OpenAI API (/v1/completions, /v1/chat/completions, streaming included) "
               "to several\n`kvforge serve` workers: the one that has seen the longest prefix of "
               "the prompt, unless the load is\nimbalanced (then the least loaded). Health checks "
               "take dead workers out. /health, /workers and\n/metrics describe the router. The "
               "bound address is printed on stderr.");
  p.AddString("workers", &workers, "comma-separated worker URLs, http://host:port,...");
  p.AddString("host", &host, "address to listen on");
  p.AddInt("port", &port, "TCP port (0: an ephemeral port)");
  p.AddString("policy", &policy, "cache_aware | round_robin");
  p.AddFloat("cache-threshold", &threshold,
             "share of the prompt a worker must have seen to win on cache (0.5)");
  p.AddInt("balance-abs", &balance_abs, "in-flight gap that counts as imbalanced (16)...");
  p.AddFloat("balance-rel", &balance_rel, "...when also max > this x min in-flight (1.5)");
  p.AddInt("health-interval-ms", &health_ms, "how often each worker's /health is checked");
  p.AddInt("block-chars", &block_chars, "prefix-locality granularity in characters (64)");
  p.AddInt("http-threads", &http_threads, "HTTP worker threads (concurrent requests)");
  if (int rc = HandleParse(p, args); rc >= 0) return rc;
  if (port < 0 || port > 65535 || health_ms <= 0 || balance_abs < 0 || balance_rel < 1 ||
      http_threads <= 0 || http_threads > 4096 || block_chars <= 0) {
    std::fprintf(stderr,
                 "kvforge: --port must be in 0..65535, --health-interval-ms, --block-chars and "
                 "--http-threads (at most 4096) positive, --balance-abs not negative, "
                 "--balance-rel at least 1\n");
    return 2;
  }
  router::RouterOptions ro;
  ro.workers = SplitCommas(workers);
  Result<router::RoutePolicy> pol = router::ParseRoutePolicy(policy);
  if (!pol.ok()) {
    std::fprintf(stderr, "kvforge: --policy: %s\n", pol.error().message().c_str());
    return 2;
  }
  ro.route.policy = *pol;
  ro.route.cache_threshold = threshold;
  ro.route.balance_abs = balance_abs;
  ro.route.balance_rel = balance_rel;
  ro.health_interval_ms = static_cast<int>(health_ms);
  ro.block_chars = static_cast<size_t>(block_chars);
  auto router = router::Router::Create(ro);
  if (!router.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", router.error().message().c_str());
    return 2;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  (*router)->StartHealthChecks();
  int up = 0;
  for (const router::WorkerReport& w : (*router)->Workers()) {
    up += w.healthy;
    std::fprintf(stderr, "kvforge: worker %s %s\n", w.url.c_str(), w.healthy ? "up" : "down");
  }
  if (up == 0)
    std::fprintf(stderr, "kvforge: no worker is up yet; requests get 503 until one is\n");
  server::HttpServerOptions so;
  so.host = host;
  so.port = static_cast<int>(port);
  so.threads = static_cast<int>(http_threads);
  so.read_timeout_s = 600;
  server::HttpServer http(so, (*router)->Routes(), (*router)->ErrorBuilder());
  if (Status s = http.Start(); !s.ok()) {
    std::fprintf(stderr, "kvforge: %s\n", s.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "kvforge: routing (%s) %zu workers\n", router::RoutePolicyName(*pol),
               ro.workers.size());
  std::fprintf(stderr, "kvforge: listening on http://%s:%d\n", host.c_str(), http.port());
  std::fflush(stderr);
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "kvforge: %s received, shutting down\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
  // A second signal while draining ends the process at once.
  std::thread([signals] {
    int again = 0;
    sigwait(&signals, &again);
    std::fprintf(stderr, "kvforge: second signal, exiting now\n");
    std::_Exit(1);
  }).detach();
  (*router)->BeginShutdown();
  http.Stop();
  router->reset();
  std::fprintf(stderr, "kvforge: stopped\n");
  return 0;
}

}  // namespace kvforge::cli
