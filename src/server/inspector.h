// server/inspector.h — the web page's back end: GET / (the page), GET /v1/kvforge/kv (a KV cache
// snapshot from the engine thread) and GET /v1/kvforge/history (the charts' samples, taken by a
// sampler thread once per interval from the engine's counters and the server's latency
// histograms). When nobody asks, the engine does no snapshot work; the sampler costs one
// Stats() copy per interval.
// Thread-safety: handlers run on HTTP workers; Start/Stop from the controlling thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "kvforge/llm.h"
#include "server/http_transport.h"
#include "server/metrics.h"
#include "server/stats_history.h"

namespace kvforge::server {

struct InspectorOptions {
  int interval_ms = 1000;           // one history sample per interval
  size_t samples = 600;             // history kept (10 minutes at 1 s)
  size_t max_prefix_entries = 500;  // the page draws at most 200 lines
  int snapshot_timeout_ms = 2000;   // a step longer than this answers 503
};

class Inspector {
 public:
  // `ttft` and `itl` are the server's histograms (GET /metrics); all must outlive the Inspector.
  Inspector(AsyncEngine* engine, const Histogram* ttft, const Histogram* itl, std::string model_id,
            const InspectorOptions& options);
  ~Inspector();  // Stop()
  Inspector(const Inspector&) = delete;
  Inspector& operator=(const Inspector&) = delete;

  void Start();  // the sampler thread
  void Stop();   // idempotent

  HttpResponse Page(const HttpRequest& req) const;
  HttpResponse KvSnapshot(const HttpRequest& req) const;
  HttpResponse History(const HttpRequest& req) const;

 private:
  void Sample();

  AsyncEngine* engine_;
  const Histogram* ttft_;
  const Histogram* itl_;
  std::string model_id_;
  InspectorOptions opts_;
  StatsHistory history_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread sampler_;
};

}  // namespace kvforge::server
