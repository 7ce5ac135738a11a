// engine/engine_resources.h — what every entry point of the engine shares, made once by one set
// of rules: the config's validation, the model and its tokenizer, the KV cache (sized by one
// rule), the compute thread pool and the KV calibration at start. EngineCore owns them; the
// synchronous Engine and LLM/AsyncEngine are fronts of that core.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/thread_pool.h"
#include "kvforge/engine.h"
#include "kvforge/engine_config.h"
#include "kvstore/paged_kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvforge::engine {

struct EngineResources {
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<kvstore::PagedKvCache> cache;
  std::unique_ptr<kernels::ThreadPool> pool;
  int64_t max_model_len = 0;
  kvstore::PagedKvCacheConfig cache_config;  // what `cache` was made from
  uint64_t block_bytes = 0;  // one KV block of every layer, K and V, scales included
};

// Loads the model (the embedded one for an empty path) and tokenizer, sizes and creates the KV
// cache, starts the pool and calibrates. The pool's size, unless kv_cache_memory_bytes or
// memory_utilization says otherwise: a full context for each of `concurrent_sequences` (the
// batched engine: max_num_seqs; the synchronous Engine: 1), at most 40% of the memory available
// at start minus the weights, and never less than one full context.
Result<EngineResources> CreateEngineResources(const EngineConfig& config,
                                              int64_t concurrent_sequences);

// The public description of the model and its KV cache (kvforge::ModelInfo).
ModelInfo DescribeModel(const EngineResources& r);

}  // namespace kvforge::engine
