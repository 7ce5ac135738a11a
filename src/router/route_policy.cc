#include "router/route_policy.h"

#include <algorithm>

namespace kvforge::router {

Result<RoutePolicy> ParseRoutePolicy(std::string_view name) {
  if (name == "cache_aware") return RoutePolicy::kCacheAware;
  if (name == "round_robin") return RoutePolicy::kRoundRobin;
  return Status::InvalidArgument("routing policy must be cache_aware or round_robin (got '" +
                                 std::string(name) + "')");
}

const char* RoutePolicyName(RoutePolicy p) {
  return p == RoutePolicy::kCacheAware ? "cache_aware" : "round_robin";
}

namespace {

// The next healthy worker from *turn on, among those for which `eligible` holds.
template <typename F>
int NextInTurn(const std::vector<WorkerView>& w, uint64_t* turn, F eligible) {
  const size_t n = w.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = static_cast<size_t>((*turn + k) % n);
    if (w[i].healthy && eligible(w[i])) {
      *turn = *turn + k + 1;
      return static_cast<int>(i);
    }
  }
  return -1;
}

}  // namespace

RouteChoice ChooseWorker(const std::vector<WorkerView>& workers, size_t prompt_chars,
                         const RouteOptions& options, uint64_t* turn) {
  RouteChoice c;
  int64_t lo = INT64_MAX, hi = -1;
  for (const WorkerView& w : workers) {
    if (!w.healthy) continue;
    lo = std::min(lo, w.in_flight);
    hi = std::max(hi, w.in_flight);
  }
  if (hi < 0) return c;  // nobody healthy
  if (options.policy == RoutePolicy::kRoundRobin) {
    c.worker = NextInTurn(workers, turn, [](const WorkerView&) { return true; });
    return c;
  }
  const bool imbalanced = hi - lo > options.balance_abs &&
                          static_cast<double>(hi) > options.balance_rel * static_cast<double>(lo);
  if (!imbalanced && prompt_chars > 0) {
    int best = -1;
    for (size_t i = 0; i < workers.size(); ++i) {
      const WorkerView& w = workers[i];
      if (!w.healthy || w.matched_chars == 0) continue;
      if (best < 0 || w.matched_chars > workers[static_cast<size_t>(best)].matched_chars ||
          (w.matched_chars == workers[static_cast<size_t>(best)].matched_chars &&
           w.in_flight < workers[static_cast<size_t>(best)].in_flight))
        best = static_cast<int>(i);
    }
    if (best >= 0 && static_cast<double>(workers[static_cast<size_t>(best)].matched_chars) >=
                         options.cache_threshold * static_cast<double>(prompt_chars)) {
      c.worker = best;
      c.by_cache = true;
      return c;
    }
  }
  // The least loaded, ties taken in turn so that an idle cluster spreads new prefixes.
  c.worker = NextInTurn(workers, turn, [lo](const WorkerView& w) { return w.in_flight == lo; });
  return c;
}

}  // namespace kvforge::router
