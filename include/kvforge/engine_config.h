// kvforge/engine_config.h — the one engine configuration, shared by the single-request Engine
// (kvforge/engine.h) and the batched LLM / AsyncEngine (kvforge/llm.h). Field names are vLLM's
// where vLLM has the option. Choices are enums; their names (the CLI's, HTTP's and Python's
// spelling) are parsed and printed in one place, kvforge/config_names.h, and every field is
// listed once, by name, in EngineConfigFields() there, so a front end sets any option by name.
#pragma once

#include <cstdint>
#include <string>

#include "kvforge/kv_policy.h"
#include "kvforge/status.h"

namespace kvforge {

// KV-cache element types (docs/kv_quantization.md). kAuto: f16 (f32 with kv_f16 = false); as a
// K or V override, kAuto means "as kv_cache_dtype".
enum class KvCacheDtype : uint8_t {
  kAuto,
  kF32,
  kF16,
  kBf16,
  kFp8E4M3,
  kFp8E5M2,
  kInt8,
  kQ8_0,
  kQ4_0,
  kKivi2,
  kKivi4,
  kKvQuant3,
  kTurbo3,
  kTurbo4,
};
enum class BatchingMode : uint8_t { kContinuous, kStatic };  // static: the baseline, to measure
enum class PreemptionMode : uint8_t { kRecompute, kSwap };
enum class SchedulingPolicy : uint8_t { kFcfs, kPriority };
enum class PrefixCacheMode : uint8_t { kHash, kRadix };  // vLLM-style hashes | SGLang-style tree
// MLA models (deepseek2): absorbed (MQA over the latents), naive (per-head K/V decompressed), or
// auto: per sequence chunk, the form with less arithmetic (absorbed for decode, naive for long
// prefill chunks). Other models ignore it.
enum class MlaAttentionMode : uint8_t { kAuto, kAbsorbed, kNaive };
// How offloaded KV chunks are compressed (docs/kv_cache.md#tiers).
enum class KvOffloadCompression : uint8_t { kNone, kLz4, kZstd };
// When computed chunks go down the tiers: at once (write-through: shared tiers see them while
// the hot pool still holds them) or when the hot pool drops their blocks (write-back: nothing is
// written for prefixes the pool keeps; what is still held is written when the engine closes).
enum class KvOffloadWrite : uint8_t { kThrough, kBack };
// Speculative decoding (docs/adr/0020): off, prompt lookup (n-gram matches in the sequence's own
// tokens) or a draft model (a smaller GGUF with the same vocabulary).
enum class SpeculativeMethod : uint8_t { kOff, kNgram, kDraftModel };

struct EngineConfig {
  // --- model and threads ------------------------------------------------------------------
  std::string model;          // GGUF path; empty: the embedded default model
  int threads = 0;            // 0: one per core
  int64_t max_model_len = 0;  // 0: the model's context (capped at 8192)
  bool mlock = false;         // pin the weights in RAM (a refusal is logged, not fatal)

  // --- KV memory ----------------------------------------------------------------------------
  uint64_t kv_cache_memory_bytes = 0;  // KV pool budget; 0: see memory_utilization
  // Fraction of the RAM available at start minus the weights (the CPU analogue of vLLM's
  // gpu_memory_utilization). Neither set: a full context per max_num_seqs (Engine: one),
  // capped at 40% of available RAM.
  double memory_utilization = 0;
  int32_t block_size = 16;  // KV block, tokens (KIVI rounds it up to a multiple of 32)

  // --- KV dtype (docs/kv_quantization.md) -----------------------------------------------------
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  KvCacheDtype kv_cache_dtype_k = KvCacheDtype::kAuto;  // llama.cpp -ctk; kAuto: kv_cache_dtype
  KvCacheDtype kv_cache_dtype_v = KvCacheDtype::kAuto;  // llama.cpp -ctv
  bool kv_f16 = true;                                   // what kAuto means: f16, or f32
  // FP8 scales / kvquant3 calibration: "" (FP8: 1.0; kvquant3: the built-in calibration text),
  // "calibrate" (the first batch; vLLM's calculate_kv_scales) or a file from SaveKvScales.
  std::string kv_scales;
  bool kv_scales_per_head = false;     // one FP8 scale per KV head instead of per tensor
  int64_t kivi_residual_tokens = 128;  // KIVI: newest tokens kept in f16 (a multiple of 32)
  bool kivi_eager = false;  // KIVI: quantize before the step's attention (simulated quantization)
  bool kvquant_post_rope_keys = false;  // kvquant3 ablation: quantize keys after RoPE
  bool kv_turbo_qjl = false;            // turbo3/turbo4 KEYS: TurboQuant-prod (QJL sketch)
  MlaAttentionMode mla_attention = MlaAttentionMode::kAuto;  // deepseek2's attention form

  // --- scheduling -----------------------------------------------------------------------------
  int64_t max_num_batched_tokens = 2048;  // tokens per forward step (Engine: its prefill chunk)
  int64_t max_num_seqs = 64;              // running sequences per step
  bool chunked_prefill = true;
  // Caps each prefill chunk (0: only the token budget caps it), so a long prompt joins the
  // running decodes in slices and their inter-token latency stays bounded.
  int64_t long_prefill_token_threshold = 0;
  // Decode-priority chunking (docs/adr/0012): while sequences decode, a step's prefill is cut so
  // that the step's time, predicted from the steps measured so far, stays within max_itl_ms; the
  // prefill budget shrinks as the decodes grow. 0: off (only the token budget caps a step).
  double max_itl_ms = 0;
  // Most prefill tokens a step with decodes always carries under max_itl_ms (fewer when that many
  // would add over a quarter of the target to the step; at least one).
  int64_t min_prefill_chunk = 32;
  // With max_itl_ms: the cut is lifted for a step while a prompt waiting for its first token
  // would otherwise get it later than this (time since arrival plus its remaining prefill, both
  // predicted from the measured steps). 0: never lifted.
  double max_ttft_ms = 0;
  BatchingMode batching = BatchingMode::kContinuous;
  PreemptionMode preemption_mode = PreemptionMode::kRecompute;
  uint64_t swap_space_bytes = 256ull << 20;  // host memory for swapped-out KV blocks
  SchedulingPolicy scheduling_policy = SchedulingPolicy::kFcfs;
  // Contiguous baseline (FasterTransformer/Orca style, for measurement only): each admitted
  // sequence reserves max_model_len slots up front.
  bool contiguous_kv = false;

  // --- prefix caching (docs/kv_cache.md) ------------------------------------------------------
  bool enable_prefix_caching = true;
  PrefixCacheMode prefix_cache_mode = PrefixCacheMode::kHash;

  // --- KV offload tiers (docs/kv_cache.md#tiers): KV of cached prefixes is also written, in
  // chunks, to these tiers below the pool and loaded back on a later hit. Needs prefix caching
  // (hash mode). All off by default ------------------------------------------------------------
  uint64_t kv_offload_ram_bytes = 0;            // host-RAM tier capacity (0: no RAM tier)
  std::string kv_offload_disk;                  // disk tier directory ("": no disk tier)
  uint64_t kv_offload_disk_bytes = 8ull << 30;  // disk tier capacity
  int64_t kv_offload_chunk_tokens = 256;        // tokens per chunk (a multiple of block_size)
  // A waiting request's chunks are fetched on a loader thread while other requests step; past
  // this it is admitted without them and recomputes what they held.
  int64_t kv_offload_load_timeout_ms = 1000;
  // The first this many requests still waiting behind others have their chunks fetched already,
  // while the requests ahead compute, so the loads are done when they are admitted (0: a fetch
  // starts only when its request could be admitted).
  int64_t kv_offload_prefetch_requests = 4;
  KvOffloadCompression kv_offload_compression = KvOffloadCompression::kLz4;
  KvOffloadWrite kv_offload_write = KvOffloadWrite::kThrough;
  // The dtype chunks take below the pool (f16, bf16, int8, q8_0, q4_0): smaller records in every
  // tier, at the cost of that dtype's rounding on load. kAuto: the pool's own bytes.
  KvCacheDtype kv_offload_dtype = KvCacheDtype::kAuto;
  // Shared tier: redis://[:password@]host[:port][,host:port...][/db] ("": none). Several hosts
  // (or one cluster node) mean a Redis Cluster. Capacity and LRU are the server's (maxmemory,
  // maxmemory-policy allkeys-lru).
  std::string kv_offload_redis;
  int64_t kv_offload_redis_timeout_ms = 200;  // connect and each read/write; then a miss
  int64_t kv_offload_redis_ttl_s = 0;         // expire records (0: never)

  // --- speculative decoding (docs/adr/0020): drafted tokens verified in one forward, the output
  // distributed exactly as without (greedy: the same tokens) ------------------------------------
  // kOff with speculative_model set means kDraftModel (vLLM infers the method from the model).
  SpeculativeMethod speculative_method = SpeculativeMethod::kOff;
  std::string speculative_model;       // draft GGUF (llama.cpp --model-draft)
  int32_t num_speculative_tokens = 5;  // the most tokens drafted per sequence and step
  int32_t prompt_lookup_max = 4;       // n-gram: longest suffix matched
  int32_t prompt_lookup_min = 2;       // n-gram: shortest suffix matched
  KvCacheDtype speculative_kv_cache_dtype = KvCacheDtype::kAuto;  // the draft's KV (auto: f16)
  // Per sequence, draft as many tokens as its running acceptance rate pays for, and let the
  // scheduler's step cost model drop drafts from compute-bound steps (false: always k).
  bool speculative_adaptive = true;

  // --- KV eviction (docs/kv_cache.md#eviction): every request's default; a request may set its
  // own (SamplingParams::kv_policy) --------------------------------------------------------------
  KvPolicy kv_policy;
};

// Every check of a config that needs no model (sizes, the thread limit, the KV policy, a
// kv_budget without a kv_policy); the engine makes them again, with the model's, when created.
Status ValidateEngineConfig(const EngineConfig& config);
// The speculative method a config means (kDraftModel when only speculative_model is set).
SpeculativeMethod EffectiveSpeculativeMethod(const EngineConfig& config);

}  // namespace kvforge
