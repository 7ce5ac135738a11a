// engine/kv_options.h — turns the user's KV-cache choice (vLLM's kv_cache_dtype, llama.cpp's
// -ctk / -ctv, FP8 scale source, KIVI window) into a PagedKvCacheConfig for one model, and
// describes the result for the start-up log. Shared by Engine and EngineCore.
#pragma once

#include <cstdint>
#include <string>

#include "kvforge/engine.h"
#include "kvforge/llm.h"
#include "kvforge/status.h"
#include "kvstore/paged_kv_cache.h"
#include "model/model_config.h"

namespace kvforge::engine {

struct KvCacheChoice {
  std::string dtype = "auto";  // "auto": f16, or f32 when kv_f16 is false
  std::string k_dtype;         // overrides for K / V; empty: dtype
  std::string v_dtype;
  bool kv_f16 = true;
  // FP8 scales: "" or "1" = 1.0; "calibrate" = amax of the first batch; otherwise a scales file.
  std::string fp8_scales;
  bool fp8_scales_per_head = false;
  int32_t block_tokens = 16;
  int64_t kivi_residual = 128;
  bool kivi_eager = false;
  bool kvquant_post_rope_keys = false;
  bool turbo_qjl = false;  // turbo keys only (kvquant/turbo.h)
};

// The choice an EngineOptions / LLMConfig expresses.
KvCacheChoice KvChoiceFrom(const EngineOptions& o);
KvCacheChoice KvChoiceFrom(const LLMConfig& c);

// Everything but num_blocks. KIVI keys need blocks of a multiple of 32 tokens: a smaller or
// unaligned block_tokens is rounded up (the returned config says what was used).
Result<kvstore::PagedKvCacheConfig> MakeKvCacheConfig(const model::ModelConfig& mc,
                                                      const KvCacheChoice& choice);
// Bytes one block takes over all layers, K and V, padding included.
Result<uint64_t> KvBlockBytes(const kvstore::PagedKvCacheConfig& kc);
// Bytes per token over all layers, K and V, scales included, no padding (KvLayout's rate).
int64_t KvBytesPerToken(const kvstore::PagedKvCacheConfig& kc);
// "K/V dtype" name: "q8_0", or "k=q8_0,v=f16".
std::string KvDtypeLabel(const kvstore::KvStoreConfig& sc);
// The start-up log line: dtypes, bytes per token with scales (and versus f16), blocks, memory.
std::string DescribeKvCache(const kvstore::PagedKvCache& cache);

}  // namespace kvforge::engine
