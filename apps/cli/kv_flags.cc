#include "kv_flags.h"

#include "kvforge/config_names.h"

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
}

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
  return Status::Ok();
}

}  // namespace kvforge::cli
