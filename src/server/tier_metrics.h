// server/tier_metrics.h — the KV offload tiers' part of /metrics (Prometheus text format), one
// series per tier labelled tier="ram" | "disk" | "redis". Empty when offload is off.
#pragma once

#include <string>

#include "kvforge/llm.h"

namespace kvforge::server {

std::string RenderTierMetrics(const EngineStats& stats);

}  // namespace kvforge::server
