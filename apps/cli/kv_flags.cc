#include "kv_flags.h"

#include <utility>

#include "base/strings.h"
#include "kvforge/config_names.h"
#include "kvforge/kv_policy.h"

namespace kvforge::cli {

void AddKvFlags(FlagParser& p, KvFlags* f) {
  p.AddString("kv-dtype", &f->dtype,
              "KV cache dtype: " + KvCacheDtypeChoices() + " (auto = f16, f32 with --kv-f32)");
  p.AddString("kv-dtype-k", &f->k_dtype, "K cache dtype (default: --kv-dtype)");
  p.AddString("kv-dtype-v", &f->v_dtype, "V cache dtype (default: --kv-dtype)");
  p.AddAlias("kv-cache-dtype", "kv-dtype");  // EngineConfig's (and vLLM's) names
  p.AddAlias("kv-cache-dtype-k", "kv-dtype-k");
  p.AddAlias("kv-cache-dtype-v", "kv-dtype-v");
  p.AddString(
      "kv-scales", &f->scales,
      "FP8 KV scales: 'calibrate' (amax of the first batch) or a scales file (default 1.0); "
      "kvquant3: its calibration file, or 'calibrate' (first batch; default: built-in text)");
  p.AddBool("kv-scales-per-head", &f->scales_per_head, "one FP8 scale per KV head, not per layer");
  p.AddBool("kv-turbo-qjl", &f->turbo_qjl,
            "turbo3/turbo4 keys: (b-1)-bit codes + 1-bit QJL sketch of the residual (unbiased dot "
            "products; TurboQuant-prod)");
  p.AddString("kv-policy", &f->policy, "KV eviction policy: " + KvPolicyNames());
  p.AddString("kv-budget", &f->budget,
              "KV tokens kept per sequence (e.g. 512), or a fraction of the prompt (e.g. 0.2)");
  p.AddString("kv-sinks", &f->sinks, "streaming: attention sinks kept (default 4)");
  p.AddString("kv-window", &f->window,
              "h2o: recent tokens kept (default budget/2); snapkv/pyramidkv: observation window "
              "(default 32)");
  p.AddString("kv-pool-kernel", &f->pool_kernel, "snapkv/pyramidkv: score pooling width (7)");
  p.AddString("kv-pyramid-beta", &f->pyramid_beta, "pyramidkv: layer budget slope (20)");
  p.AddString("kv-heads", &f->heads,
              "KV heads' kept sets: shared (one per layer, default), per_head, adaptive (AdaKV)");
  p.AddString("mla-attention", &f->mla_attention,
              "deepseek2 (MLA) attention: absorbed (MQA over the latents), naive (per-head K/V "
              "decompressed) or auto (the cheaper per chunk; default)");
}

void AddOffloadFlags(FlagParser& p, KvFlags* f) {
  f->offload_flags = true;
  p.AddSize("kv-offload-ram", &f->offload_ram,
            "KV offload: host-RAM tier for cached prefixes, e.g. 8GiB (default off)");
  p.AddString("kv-offload-disk", &f->offload_disk,
              "KV offload: disk tier directory, DIR or DIR:SIZE (default size 8GiB; off)");
  p.AddInt("kv-offload-chunk", &f->offload_chunk,
           "KV offload: tokens per chunk, a multiple of the block size (256)");
  p.AddString("kv-offload-compression", &f->offload_compression,
              "KV offload: chunk compression, none | lz4 | zstd (lz4)");
  p.AddString("kv-offload-dtype", &f->offload_dtype,
              "KV offload: store chunks in this smaller dtype, f16 | bf16 | int8 | q8_0 | q4_0 "
              "(auto: as the KV cache holds them)");
  p.AddString("kv-offload-write", &f->offload_write,
              "KV offload: write chunks when computed (through) or when the hot pool drops "
              "them (back) (through)");
  p.AddString("kv-offload-redis", &f->offload_redis,
              "KV offload: shared Redis tier, redis://[:PASS@]HOST[:PORT][,HOST:PORT...][/DB]; "
              "several hosts (or one cluster node) = Redis Cluster (default off)");
  p.AddInt("kv-offload-redis-timeout", &f->offload_redis_timeout_ms,
           "KV offload: Redis time-out per connect/read/write in ms, then a miss (200)");
  p.AddInt("kv-offload-prefetch", &f->offload_prefetch,
           "KV offload: waiting requests whose chunks are fetched while the requests ahead "
           "compute (4; 0: only once a request could be admitted)");
  p.AddInt("kv-offload-load-timeout", &f->offload_load_timeout_ms,
           "KV offload: longest wait for a request's chunks in ms; then it recomputes them (1000)");
  p.AddInt("kv-offload-redis-ttl", &f->offload_redis_ttl_s,
           "KV offload: Redis record expiry in seconds (0: never, the server's LRU decides)");
}

namespace {

Status ApplyOffloadFlags(const KvFlags& f, EngineConfig* config) {
  config->kv_offload_ram_bytes = f.offload_ram;
  config->kv_offload_chunk_tokens = f.offload_chunk;
  KVF_RETURN_IF_ERROR(SetConfigField(config, "kv_offload_compression", f.offload_compression)
                          .WithContext("--kv-offload-compression"));
  KVF_RETURN_IF_ERROR(SetConfigField(config, "kv_offload_write", f.offload_write)
                          .WithContext("--kv-offload-write"));
  KVF_RETURN_IF_ERROR(SetConfigField(config, "kv_offload_dtype", f.offload_dtype)
                          .WithContext("--kv-offload-dtype"));
  std::string dir = f.offload_disk;
  if (const size_t colon = dir.rfind(':'); colon != std::string::npos) {
    const std::string size = dir.substr(colon + 1);
    if (!base::ParseByteSize(size, &config->kv_offload_disk_bytes) ||
        config->kv_offload_disk_bytes == 0)
      return Status::InvalidArgument("--kv-offload-disk: bad size '" + size +
                                     "' (DIR:SIZE, e.g. /var/cache/kv:50GiB)");
    dir.resize(colon);
    if (dir.empty()) return Status::InvalidArgument("--kv-offload-disk: empty directory");
  }
  config->kv_offload_disk = dir;
  config->kv_offload_redis = f.offload_redis;
  if (f.offload_redis_timeout_ms <= 0)
    return Status::InvalidArgument("--kv-offload-redis-timeout must be positive (ms)");
  if (f.offload_redis_ttl_s < 0)
    return Status::InvalidArgument("--kv-offload-redis-ttl must not be negative");
  if (f.offload_load_timeout_ms <= 0)
    return Status::InvalidArgument("--kv-offload-load-timeout must be positive (ms)");
  config->kv_offload_redis_timeout_ms = f.offload_redis_timeout_ms;
  config->kv_offload_load_timeout_ms = f.offload_load_timeout_ms;
  if (f.offload_prefetch < 0)
    return Status::InvalidArgument("--kv-offload-prefetch must not be negative");
  config->kv_offload_prefetch_requests = f.offload_prefetch;
  config->kv_offload_redis_ttl_s = f.offload_redis_ttl_s;
  return Status::Ok();
}

}  // namespace

Status ApplyKvFlags(const KvFlags& f, EngineConfig* config) {
  KVF_RETURN_IF_ERROR(SetConfigField(config, "kv_cache_dtype", f.dtype).WithContext("--kv-dtype"));
  if (!f.k_dtype.empty())
    KVF_RETURN_IF_ERROR(
        SetConfigField(config, "kv_cache_dtype_k", f.k_dtype).WithContext("--kv-dtype-k"));
  if (!f.v_dtype.empty())
    KVF_RETURN_IF_ERROR(
        SetConfigField(config, "kv_cache_dtype_v", f.v_dtype).WithContext("--kv-dtype-v"));
  config->kv_scales = f.scales;
  config->kv_scales_per_head = f.scales_per_head;
  config->kv_turbo_qjl = f.turbo_qjl;
  KVF_RETURN_IF_ERROR(
      SetConfigField(config, "mla_attention", f.mla_attention).WithContext("--mla-attention"));
  const std::pair<const char*, const std::string*> policy_fields[] = {
      {"kv_policy", &f.policy},
      {"kv_budget", &f.budget},
      {"kv_sinks", &f.sinks},
      {"kv_window", &f.window},
      {"kv_pool_kernel", &f.pool_kernel},
      {"kv_pyramid_beta", &f.pyramid_beta},
      {"kv_heads", &f.heads},
  };
  if (f.offload_flags) KVF_RETURN_IF_ERROR(ApplyOffloadFlags(f, config));
  for (const auto& [name, text] : policy_fields) {
    if (text->empty()) continue;
    std::string flag = std::string("--") + name;
    for (char& c : flag)
      if (c == '_') c = '-';
    KVF_RETURN_IF_ERROR(SetConfigField(config, name, *text).WithContext(flag));
  }
  if (config->kv_policy.enabled() && f.budget.empty())
    return Status::InvalidArgument("--kv-policy " + f.policy + " needs --kv-budget");
  if (!config->kv_policy.enabled() && !f.budget.empty())
    return Status::InvalidArgument("--kv-budget needs --kv-policy");
  return ValidateKvPolicy(config->kv_policy);
}

}  // namespace kvforge::cli
