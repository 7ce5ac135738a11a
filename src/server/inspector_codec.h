// server/inspector_codec.h — JSON for the web page's read-only endpoints: GET /v1/kvforge/kv
// (a KvSnapshot with the engine's counters) and GET /v1/kvforge/history (StatsSamples). JSON
// stays in the codec files (nlohmann/json is included by openai_codec.cc and inspector_codec.cc
// only). Shapes: docs/server.md, "Web page".
#pragma once

#include <string>
#include <vector>

#include "kvforge/kv_snapshot.h"
#include "kvforge/llm.h"
#include "server/stats_history.h"

namespace kvforge::server {

// {"step", "pool": {...}, "blocks": {"use": "FUSC..." one letter per block (Free, Used, Shared,
// Cached), "held": [[index, request id, ref count, eviction rank (-1: none)], ...] for the blocks
// that are not free},
// "prefix_cache": {...}, "requests": [...], "stats": {...}}. A letter per block and a row per
// non-free block, not one object per block, so a 100k-block pool costs ~100 KB when idle.
std::string EncodeKvSnapshot(const KvSnapshot& snap, const EngineStats& stats,
                             const std::string& model_id);
// {"interval_s", "samples": [{"t", "running", ...}]}; -1 figures (no data) become null.
std::string EncodeHistory(const std::vector<StatsSample>& samples, double interval_s);

}  // namespace kvforge::server
