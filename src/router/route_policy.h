// router/route_policy.h — which worker gets a request (pure; the router supplies the state).
//
// cache_aware (SGLang's router): when the load is balanced, the worker that has seen the longest
// prefix of the prompt wins if that prefix is at least `cache_threshold` of the prompt; otherwise
// (or when load is imbalanced: max - min in-flight > balance_abs and max > balance_rel x min)
// the least loaded healthy worker does. round_robin: the next healthy worker in turn (the
// baseline the benchmark compares with).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvforge/status.h"

namespace kvforge::router {

enum class RoutePolicy { kCacheAware, kRoundRobin };
Result<RoutePolicy> ParseRoutePolicy(std::string_view name);  // "cache_aware" | "round_robin"
const char* RoutePolicyName(RoutePolicy p);

struct RouteOptions {
  RoutePolicy policy = RoutePolicy::kCacheAware;
  double cache_threshold = 0.5;  // share of the prompt a worker must have seen to win on cache
  int64_t balance_abs = 16;      // in-flight gap that counts as imbalanced...
  double balance_rel = 1.5;      // ...when also max > balance_rel x min
};

struct WorkerView {
  bool healthy = false;
  int64_t in_flight = 0;
  size_t matched_chars = 0;  // LocalityIndex::Match for this prompt
};

struct RouteChoice {
  int worker = -1;        // -1: no healthy worker
  bool by_cache = false;  // chosen for its cached prefix (else for load or in turn)
};

// `turn` is the round-robin counter (advanced by the call).
RouteChoice ChooseWorker(const std::vector<WorkerView>& workers, size_t prompt_chars,
                         const RouteOptions& options, uint64_t* turn);

}  // namespace kvforge::router
