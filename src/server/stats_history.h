// server/stats_history.h — the inspector's charts: one sample of the engine's counters a second
// for the last minutes, kept by the server (GET /v1/kvforge/history). Rates and latency
// percentiles are over the interval since the previous sample, from the same counters and
// histograms as GET /metrics.
// Thread-safety: Add and Samples may run concurrently (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "server/metrics.h"

namespace kvforge::server {

struct StatsSample {
  double t_s = 0;  // seconds since the server started
  int64_t running = 0, waiting = 0, swapped = 0;
  double kv_usage = 0;                      // 0-1
  double prompt_tokens_per_s = 0;           // over the interval
  double generation_tokens_per_s = 0;       // over the interval
  double prefix_hit_rate = -1;              // hit / query tokens in the interval; -1: none
  double ttft_p50_s = -1, ttft_p90_s = -1;  // -1: no request got its first token
  double itl_p50_s = -1, itl_p90_s = -1;    // -1: no token in the interval
};

// The q-quantile (0-1) of the observations made between two snapshots of one histogram,
// interpolated linearly inside the bucket that holds it (Prometheus' histogram_quantile); the
// +Inf bucket answers its lower bound. -1 when nothing was observed.
double IntervalQuantile(const Histogram::Snapshot& before, const Histogram::Snapshot& after,
                        double q);

class StatsHistory {
 public:
  explicit StatsHistory(size_t capacity) : capacity_(capacity) {}
  void Add(const StatsSample& s);
  std::vector<StatsSample> Samples() const;  // oldest first

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::deque<StatsSample> samples_;  // guarded by mu_
};

}  // namespace kvforge::server
