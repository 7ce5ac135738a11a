#include "router/router.h"

#include <chrono>

#include "base/log.h"
#include "base/strings.h"

namespace kvforge::router {

using server::HttpClient;
using server::HttpClientOptions;
using server::HttpRequest;
using server::HttpResponse;
using server::HttpResult;

namespace {

HttpResponse JsonError(int status, const std::string& message, const std::string& type) {
  HttpResponse r;
  r.status = status;
  r.body = ErrorJson(message, type, status);
  return r;
}

HttpClientOptions ClientOptions(int connect_timeout_s, int read_timeout_s) {
  HttpClientOptions o;
  o.connect_timeout_s = connect_timeout_s;
  o.read_timeout_s = read_timeout_s;
  return o;
}

// The worker's reply as the router's: status, body and content type, and who answered.
HttpResponse FromWorker(const HttpResult& r, const std::string& url) {
  HttpResponse out;
  out.status = r.status;
  out.body = r.body;
  if (std::string ct = server::FindHeader(r.headers, "Content-Type"); !ct.empty())
    out.content_type = ct;
  out.headers.emplace_back("x-kvforge-worker", url);
  return out;
}

// The request did not reach the worker (connecting failed or timed out): safe to send elsewhere.
bool NeverReached(const HttpResult& r) {
  return r.error == "Connection" || r.error == "ConnectionTimeout";
}

std::string SseError(const std::string& message) {
  return "data: " + ErrorJson(message, "upstream_error", 502) + "\n\n";
}

}  // namespace

Result<std::unique_ptr<Router>> Router::Create(RouterOptions options) {
  if (options.workers.empty()) return Status::InvalidArgument("route: no workers given");
  for (const std::string& w : options.workers)
    if (w.rfind("http://", 0) != 0)
      return Status::InvalidArgument("route: a worker is http://host:port (got '" + w + "')");
  if (options.route.cache_threshold < 0 || options.route.cache_threshold > 1)
    return Status::InvalidArgument("route: cache threshold must be within [0, 1]");
  if (options.health_interval_ms <= 0)
    return Status::InvalidArgument("route: health interval must be positive");
  return std::unique_ptr<Router>(new Router(std::move(options)));
}

Router::Router(RouterOptions options)
    : options_(std::move(options)), index_(options_.block_chars, options_.max_keys) {
  for (const std::string& url : options_.workers) {
    Worker w;
    w.url = url;
    while (!w.url.empty() && w.url.back() == '/') w.url.pop_back();
    workers_.push_back(std::move(w));
  }
}

Router::~Router() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (health_.joinable()) health_.join();
}

void Router::StartHealthChecks() {
  CheckAll();
  health_ = std::thread([this] { HealthLoop(); });
}

void Router::CheckAll() {
  std::vector<std::string> urls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Worker& w : workers_) urls.push_back(w.url);
  }
  for (size_t i = 0; i < urls.size(); ++i) {
    HttpClient client(urls[i], ClientOptions(options_.health_timeout_s, options_.health_timeout_s));
    const HttpResult r = client.Get("/health");
    const bool up = r.ok && r.status == 200;
    std::lock_guard<std::mutex> lock(mu_);
    Worker& w = workers_[i];
    if (w.healthy != up) KVF_LOG_INFO("route: worker %s is %s", w.url.c_str(), up ? "up" : "down");
    // A worker that went down may come back with an empty cache: forget what it had.
    if (w.healthy && !up) index_.ForgetWorker(static_cast<int>(i));
    w.healthy = up;
  }
}

void Router::HealthLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.health_interval_ms),
                      [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    CheckAll();
    lock.lock();
  }
}

int Router::Pick(const std::string& text, const std::vector<int>& tried) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<size_t> matched = index_.Match(text, static_cast<int>(workers_.size()));
  std::vector<WorkerView> views(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    views[i].healthy = workers_[i].healthy;
    for (int t : tried)
      if (t == static_cast<int>(i)) views[i].healthy = false;
    views[i].in_flight = workers_[i].in_flight;
    views[i].matched_chars = matched[i];
  }
  const RouteChoice c = ChooseWorker(views, text.size(), options_.route, &turn_);
  if (c.worker < 0) {
    ++no_worker_;
    return -1;
  }
  Worker& w = workers_[static_cast<size_t>(c.worker)];
  ++w.in_flight;
  ++w.requests;
  if (c.by_cache) ++w.by_cache;
  index_.Insert(text, c.worker);
  return c.worker;
}

void Router::Done(int worker, bool failed, bool refused) {
  std::lock_guard<std::mutex> lock(mu_);
  Worker& w = workers_[static_cast<size_t>(worker)];
  --w.in_flight;
  if (failed) ++w.failures;
  if (refused && w.healthy) {
    KVF_LOG_WARN("route: worker %s refused a connection; marked down", w.url.c_str());
    w.healthy = false;
    index_.ForgetWorker(worker);
  }
}

server::HttpHeaders Router::UpstreamHeaders(const HttpRequest& req) const {
  server::HttpHeaders h;
  for (const char* name : {"Authorization", "X-Request-Id"})
    if (std::string v = req.Header(name); !v.empty()) h.emplace_back(name, v);
  return h;
}

HttpResponse Router::Forward(const HttpRequest& req) {
  const RoutingKey key = ReadRoutingKey(req.body);
  if (key.stream) return Stream(req, key);
  std::vector<int> tried;
  for (;;) {
    const int w = Pick(key.text, tried);
    if (w < 0) return JsonError(503, "route: no healthy worker to take the request", "unavailable");
    tried.push_back(w);
    const std::string url = workers_[static_cast<size_t>(w)].url;  // immutable after start
    HttpClient client(url, ClientOptions(options_.connect_timeout_s, options_.upstream_timeout_s));
    const HttpResult r = client.Post(
        req.path, req.body, UpstreamHeaders(req),
        req.Header("Content-Type").empty() ? "application/json" : req.Header("Content-Type"));
    const bool refused = !r.ok && NeverReached(r);
    Done(w, !r.ok, refused);
    if (refused) continue;  // it never reached the worker: the next one takes it
    if (!r.ok)
      return JsonError(502, "route: worker " + url + " failed during the request (" + r.error + ")",
                       "upstream_error");
    return FromWorker(r, url);
  }
}

HttpResponse Router::Stream(const HttpRequest& req, const RoutingKey& key) {
  // The status line goes out before a worker answers, so failures become SSE error events.
  HttpResponse out;
  out.content_type = "text/event-stream";
  out.headers.emplace_back("Cache-Control", "no-cache");
  const server::HttpHeaders headers = UpstreamHeaders(req);
  out.stream = [this, path = req.path, body = req.body, headers,
                text = key.text](server::StreamSink& sink) {
    std::vector<int> tried;
    for (;;) {
      const int w = Pick(text, tried);
      if (w < 0) {
        sink.Write(SseError("route: no healthy worker to take the request"));
        return;
      }
      tried.push_back(w);
      const std::string url = workers_[static_cast<size_t>(w)].url;
      HttpClient client(url,
                        ClientOptions(options_.connect_timeout_s, options_.upstream_timeout_s));
      bool wrote = false, client_gone = false;
      const HttpResult r = client.PostStream(path, body, headers, [&](std::string_view data) {
        wrote = true;
        if (shutting_down_) {
          sink.Write(SseError("route: shutting down"));
          client_gone = true;  // not the worker's failure
          return false;
        }
        if (!sink.Write(data)) {
          client_gone = true;  // closing the upstream connection aborts the worker's request
          return false;
        }
        return true;
      });
      const bool refused = !r.ok && NeverReached(r) && !wrote;
      Done(w, !r.ok && !client_gone, refused);
      if (refused) continue;
      if (client_gone) return;
      if (!r.ok) {
        sink.Write(SseError("route: worker " + url + " failed mid-stream (" + r.error + ")"));
      } else if (r.status < 200 || r.status >= 300) {
        // The worker's own error, as one event (each line of its body a data line).
        std::string event;
        size_t at = 0;
        while (at < r.body.size()) {
          const size_t nl = r.body.find('\n', at);
          event += "data: " + r.body.substr(at, nl == std::string::npos ? nl : nl - at) + "\n";
          if (nl == std::string::npos) break;
          at = nl + 1;
        }
        sink.Write(event + "\n");
      }
      return;
    }
  };
  return out;
}

HttpResponse Router::Passthrough(const HttpRequest& req, bool any_worker) {
  std::vector<std::string> urls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Worker& w : workers_)
      if (w.healthy || !any_worker) urls.push_back(w.url);
  }
  for (const std::string& url : urls) {
    HttpClient client(url,
                      ClientOptions(options_.connect_timeout_s, options_.health_timeout_s * 5));
    const HttpResult r = client.Get(req.path, UpstreamHeaders(req));
    if (!r.ok) continue;
    return FromWorker(r, url);
  }
  return JsonError(503, "route: no healthy worker answered", "unavailable");
}

std::vector<WorkerReport> Router::Workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return workers_;
}

std::string Router::Metrics() const {
  const std::vector<WorkerReport> ws = Workers();
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help, auto get) {
    out += base::StrFormat("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (const WorkerReport& w : ws)
      out += base::StrFormat("%s{worker=\"%s\"} %lld\n", name, w.url.c_str(), (long long)get(w));
  };
  family("kvforge_router_requests_total", "counter", "Requests sent to the worker.",
         [](const WorkerReport& w) { return w.requests; });
  family("kvforge_router_routed_by_cache_total", "counter",
         "Requests sent to the worker for its cached prefix.",
         [](const WorkerReport& w) { return w.by_cache; });
  family("kvforge_router_failures_total", "counter", "Requests the worker failed.",
         [](const WorkerReport& w) { return w.failures; });
  family("kvforge_router_in_flight", "gauge", "Requests at the worker now.",
         [](const WorkerReport& w) { return w.in_flight; });
  family("kvforge_router_worker_healthy", "gauge", "1 while the worker passes its health check.",
         [](const WorkerReport& w) { return w.healthy ? 1 : 0; });
  std::lock_guard<std::mutex> lock(mu_);
  out += base::StrFormat(
      "# HELP kvforge_router_no_worker_total Requests refused with no healthy worker.\n"
      "# TYPE kvforge_router_no_worker_total counter\nkvforge_router_no_worker_total %lld\n",
      (long long)no_worker_);
  return out;
}

std::vector<server::HttpRoute> Router::Routes() {
  auto forward = [this](const HttpRequest& r) { return Forward(r); };
  std::vector<server::HttpRoute> routes = {
      {"POST", "/v1/completions", forward},
      {"POST", "/v1/chat/completions", forward},
      {"GET", "/v1/models", [this](const HttpRequest& r) { return Passthrough(r, true); }},
      {"GET", "/health",
       [this](const HttpRequest&) {
         int up = 0;
         for (const WorkerReport& w : Workers()) up += w.healthy;
         HttpResponse out;
         out.status = up > 0 ? 200 : 503;
         out.body = base::StrFormat("{\"status\":\"%s\",\"healthy_workers\":%d}",
                                    up > 0 ? "ok" : "unavailable", up);
         return out;
       }},
      {"GET", "/workers",
       [this](const HttpRequest&) {
         HttpResponse out;
         out.body = WorkersJson(Workers(), RoutePolicyName(options_.route.policy));
         return out;
       }},
      {"GET", "/metrics",
       [this](const HttpRequest&) {
         HttpResponse out;
         out.content_type = "text/plain; version=0.0.4";
         out.body = Metrics();
         return out;
       }},
  };
  return routes;
}

server::HttpErrorBuilder Router::ErrorBuilder() const {
  return [](int status, const std::string& message) {
    return JsonError(status, message, status >= 500 ? "server_error" : "invalid_request_error");
  };
}

}  // namespace kvforge::router
