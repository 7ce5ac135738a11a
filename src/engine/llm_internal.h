// engine/llm_internal.h — the EngineCore behind an LLM, for kvforge's own benchmarks and tests
// (statistics the public EngineStats does not carry: sharing savings, model shapes, the cache).
// Not part of the public API (include/kvforge/llm.h only forward-declares it).
#pragma once

#include "engine/engine_core.h"
#include "kvforge/llm.h"

namespace kvforge::engine {

// The core owned by `llm` (nullptr when the LLM failed to start).
EngineCore* CoreOf(LLM& llm);

}  // namespace kvforge::engine
