// kv_flags.h — the KV-cache dtype flags shared by run, serve, bench latency and eval:
//   --kv-dtype T (vLLM's --kv-cache-dtype), --kv-dtype-k / --kv-dtype-v (llama.cpp -ctk / -ctv),
//   --kv-scales (FP8: "calibrate" or a scales file), --kv-scales-per-head, --kv-turbo-qjl (turbo
//   keys in the TurboQuant-prod format), and KV eviction: --kv-policy NAME --kv-budget B with the
//   method's parameters --kv-sinks, --kv-window, --kv-pool-kernel, --kv-pyramid-beta; and
//   --mla-attention (deepseek2: absorbed, naive or auto). The KV offload tiers (--kv-offload-ram
//   SIZE, --kv-offload-disk DIR[:SIZE], --kv-offload-chunk TOKENS, --kv-offload-compression,
//   --kv-offload-write through|back,
//   --kv-offload-redis URL, --kv-offload-redis-timeout MS, --kv-offload-load-timeout MS,
//   --kv-offload-redis-ttl SECONDS) are
//   a separate group, for the commands that run the batched engine (serve, bench throughput).
#pragma once

#include <string>

#include "flags.h"
#include "kvforge/engine_config.h"
#include "kvforge/status.h"

namespace kvforge::cli {

struct KvFlags {
  std::string dtype = "auto";
  std::string k_dtype, v_dtype;
  std::string scales;
  bool scales_per_head = false;
  bool turbo_qjl = false;
  // Eviction: text forms of EngineConfig's kv_policy fields (empty: the default).
  std::string policy = "none";
  std::string budget, sinks, window, pool_kernel, pyramid_beta, heads;
  std::string mla_attention = "auto";
  // KV offload tiers (docs/kv_cache.md#tiers); applied only when AddOffloadFlags added them.
  bool offload_flags = false;
  uint64_t offload_ram = 0;
  std::string offload_disk;  // DIR or DIR:SIZE
  int64_t offload_chunk = 256;
  std::string offload_compression = "lz4";
  std::string offload_write = "through";
  std::string offload_dtype = "auto";
  int64_t offload_prefetch = 4;
  std::string offload_redis;  // redis://host:port[,host:port...][/db]
  int64_t offload_redis_timeout_ms = 200;
  int64_t offload_redis_ttl_s = 0;
  int64_t offload_load_timeout_ms = 1000;
};

void AddKvFlags(FlagParser& p, KvFlags* f);
void AddOffloadFlags(FlagParser& p, KvFlags* f);
// Sets the config's KV fields from the flags' text (kInvalidArgument names a bad dtype).
Status ApplyKvFlags(const KvFlags& f, EngineConfig* config);

}  // namespace kvforge::cli
