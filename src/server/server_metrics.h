// server/server_metrics.h — the server's Prometheus series: kvforge's own names and, beside them,
// vLLM's names and types for the same quantities with a model_name label, so that dashboards and
// alerts written for vLLM read a kvforge server unchanged (docs/server.md lists the mapping).
//
//   ServerMetrics m(info);
//   m.OnFinished(output, {.n = 1, .max_tokens = 64});   // engine thread, per finished request
//   std::string page = m.Render(engine->Stats());       // GET /metrics
//
// Counters kept by the engine (preemptions, prefix-cache lookups, drafts) are copied from its
// statistics at each Render; the rest are counted here from request outputs.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kvforge/llm.h"
#include "server/metrics.h"

namespace kvforge::server {

// What vLLM's cache_config_info and the token-count buckets describe.
struct ServedModelInfo {
  std::string model_name;  // the served model id: the model_name label
  int64_t max_model_len = 0;
  int64_t block_tokens = 0;
  int64_t num_blocks = 0;
  std::string cache_dtype;
};

// The request parameters vLLM's request_params_* histograms record.
struct RequestShape {
  int32_t n = 1;
  int32_t max_tokens = 0;
};

class ServerMetrics {
 public:
  explicit ServerMetrics(const ServedModelInfo& info);
  ~ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  void OnGenerated(int64_t tokens);
  // A request's prompt, counted once when it first produced output.
  void OnPromptScheduled(int64_t tokens);
  // A request's final output (aborted or not).
  void OnFinished(const RequestOutput& out, const RequestShape& shape);
  void OnRejected();  // a 429 for want of room
  void OnHttpStatus(int code);

  // The exposition page, its engine-kept series refreshed from `stats`.
  std::string Render(const EngineStats& stats);

  // The latency histograms the inspector charts (kvforge_* names).
  Histogram* ttft() const;
  Histogram* itl() const;

 private:
  struct Series;
  ServedModelInfo info_;
  std::string model_label_;  // info_.model_name escaped for a label value
  MetricsRegistry reg_;
  std::unique_ptr<Series> s_;
};

}  // namespace kvforge::server
