#include "server/stats_history.h"

#include <algorithm>

namespace kvforge::server {

double IntervalQuantile(const Histogram::Snapshot& before, const Histogram::Snapshot& after,
                        double q) {
  const size_t n = after.cumulative.size();  // bounds, then +Inf
  if (n == 0 || before.cumulative.size() != n) return -1;
  const uint64_t total = after.count - std::min(after.count, before.count);
  if (total == 0) return -1;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  uint64_t below = 0;  // observations in the interval under the current bucket
  for (size_t i = 0; i < n; ++i) {
    const uint64_t cum = after.cumulative[i] - std::min(after.cumulative[i], before.cumulative[i]);
    if (static_cast<double>(cum) >= rank && cum > below) {
      const double lo = i == 0 ? 0.0 : after.upper_bounds[i - 1];
      if (i >= after.upper_bounds.size()) return lo;  // +Inf: its lower bound
      const double hi = after.upper_bounds[i];
      const double frac = (rank - static_cast<double>(below)) / static_cast<double>(cum - below);
      return lo + (hi - lo) * std::clamp(frac, 0.0, 1.0);
    }
    below = cum;
  }
  return after.upper_bounds.empty() ? -1 : after.upper_bounds.back();
}

void StatsHistory::Add(const StatsSample& s) {
  std::lock_guard<std::mutex> lock(mu_);
  samples_.push_back(s);
  while (samples_.size() > capacity_) samples_.pop_front();
}

std::vector<StatsSample> StatsHistory::Samples() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {samples_.begin(), samples_.end()};
}

}  // namespace kvforge::server
