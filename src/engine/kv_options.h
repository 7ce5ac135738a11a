// engine/kv_options.h — turns the KV-cache choice of an EngineConfig (vLLM's kv_cache_dtype,
// llama.cpp's -ctk / -ctv, FP8 scale source, KIVI window) into a PagedKvCacheConfig for one
// model, and describes the result for the start-up log. Shared by Engine and EngineCore.
#pragma once

#include <cstdint>
#include <string>

#include "kvforge/engine_config.h"
#include "kvforge/status.h"
#include "kvstore/paged_kv_cache.h"
#include "model/model_config.h"

namespace kvforge::engine {

// Everything but num_blocks. KIVI keys need blocks of a multiple of 32 tokens: a smaller or
// unaligned block_tokens is rounded up (the returned config says what was used).
// The KV part of an EngineConfig (dtypes, scales, KIVI window, block size, ...), for one model.
Result<kvstore::PagedKvCacheConfig> MakeKvCacheConfig(const model::ModelConfig& mc,
                                                      const EngineConfig& config);
// The stored dtype an EngineConfig's choice means (kAuto: f16, or f32 without kv_f16), and the
// public choice naming a stored dtype: the one mapping between the two enums.
kvquant::KvDtype StoredKvDtype(KvCacheDtype choice, bool kv_f16);
KvCacheDtype PublicKvDtype(kvquant::KvDtype stored);
// Bytes one block takes over all layers, K and V, padding included.
Result<uint64_t> KvBlockBytes(const kvstore::PagedKvCacheConfig& kc);
// Bytes per token over all layers, K and V, scales included, no padding (KvLayout's rate).
int64_t KvBytesPerToken(const kvstore::PagedKvCacheConfig& kc);
// "K/V dtype" name: "q8_0", or "k=q8_0,v=f16".
std::string KvDtypeLabel(const kvstore::KvStoreConfig& sc);
// The start-up log line: dtypes, bytes per token with scales (and versus f16), blocks, memory.
std::string DescribeKvCache(const kvstore::PagedKvCache& cache);

}  // namespace kvforge::engine
