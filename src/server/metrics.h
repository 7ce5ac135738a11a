// server/metrics.h — a small Prometheus registry: counters, gauges, labelled counters and
// histograms, rendered in the text exposition format (version 0.0.4).
//
//   MetricsRegistry reg;
//   Histogram* ttft = reg.AddHistogram("kvforge_time_to_first_token_seconds", "...", {0.01, 0.1,
//   1}); ttft->Observe(0.042); std::string body = reg.Render();   // served at GET /metrics
//
// Metrics render in registration order. Names must be valid Prometheus names (not checked). Each
// metric may carry constant labels (vLLM's model_name="..."), written on every sample after the
// sample's own labels (code, finished_reason, le).
// Thread-safety: every metric may be updated from any thread; Render may run concurrently with
// updates (each metric is read consistently; the page as a whole is not a snapshot). Pointers
// returned by Add* stay valid for the registry's lifetime.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kvforge::server {

// A monotonically increasing value.
class Counter {
 public:
  void Inc(double v = 1) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value set from outside, e.g. from the engine's statistics. Registered with type "counter"
// it carries a total kept elsewhere (which must never decrease).
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A counter per value of one label, e.g. kvforge_http_requests_total{code="200"}.
class LabeledCounter {
 public:
  explicit LabeledCounter(std::string label) : label_(std::move(label)) {}
  void Inc(const std::string& label_value, double v = 1);
  double value(const std::string& label_value) const;
  const std::string& label() const { return label_; }
  std::map<std::string, double> Snapshot() const;

 private:
  std::string label_;
  mutable std::mutex mu_;
  std::map<std::string, double> values_;  // guarded by mu_
};

// Cumulative buckets with upper bounds (le), plus _sum and _count; +Inf is implicit.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // sorted ascending
  void Observe(double v);
  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Get() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last is +Inf; guarded by mu_
  double sum_ = 0;                // guarded by mu_
  uint64_t count_ = 0;            // guarded by mu_
};

// Constant labels of one metric: (name, value) pairs.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter* AddCounter(const std::string& name, const std::string& help,
                      const MetricLabels& labels = {});
  Gauge* AddGauge(const std::string& name, const std::string& help, bool is_counter = false,
                  const MetricLabels& labels = {});
  LabeledCounter* AddLabeledCounter(const std::string& name, const std::string& help,
                                    const std::string& label, const MetricLabels& labels = {});
  Histogram* AddHistogram(const std::string& name, const std::string& help,
                          std::vector<double> upper_bounds, const MetricLabels& labels = {});

  std::string Render() const;

 private:
  struct Entry;
  Entry* Push(const std::string& name, const std::string& help, const char* type,
              const MetricLabels& labels);
  std::vector<std::unique_ptr<Entry>> entries_;  // fixed after setup
};

// Formats a sample value the way Prometheus clients do: integers without a fraction, +Inf/NaN.
std::string PrometheusNumber(double v);
// A label value as the text format writes it: backslash, double quote and newline escaped.
std::string EscapeLabelValue(const std::string& s);

}  // namespace kvforge::server
