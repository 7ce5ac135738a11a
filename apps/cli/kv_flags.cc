#include "kv_flags.h"

namespace kvforge::cli {

void AddKvFlags(FlagParser& p, KvFlags* f) {
  p.AddString("kv-dtype", &f->dtype,
              "KV cache dtype: auto|f32|f16|bf16|fp8|fp8_e4m3|fp8_e5m2|int8|q8_0|q4_0|kivi2|kivi4|"
              "kvquant3|turbo3|turbo4 (auto = f16, f32 with --kv-f32)");
  p.AddString("kv-dtype-k", &f->k_dtype, "K cache dtype (default: --kv-dtype)");
  p.AddString("kv-dtype-v", &f->v_dtype, "V cache dtype (default: --kv-dtype)");
  p.AddString(
      "kv-scales", &f->scales,
      "FP8 KV scales: 'calibrate' (amax of the first batch) or a scales file (default 1.0); "
      "kvquant3: its calibration file, or 'calibrate' (first batch; default: built-in text)");
  p.AddBool("kv-scales-per-head", &f->scales_per_head, "one FP8 scale per KV head, not per layer");
  p.AddBool("kv-turbo-qjl", &f->turbo_qjl,
            "turbo3/turbo4 keys: (b-1)-bit codes + 1-bit QJL sketch of the residual (unbiased dot "
            "products; TurboQuant-prod)");
}

void ApplyKvFlags(const KvFlags& f, EngineOptions* o) {
  o->kv_cache_dtype = f.dtype;
  o->kv_cache_dtype_k = f.k_dtype;
  o->kv_cache_dtype_v = f.v_dtype;
  o->kv_scales = f.scales;
  o->kv_scales_per_head = f.scales_per_head;
  o->kv_turbo_qjl = f.turbo_qjl;
}

void ApplyKvFlags(const KvFlags& f, LLMConfig* c) {
  c->kv_cache_dtype = f.dtype;
  c->kv_cache_dtype_k = f.k_dtype;
  c->kv_cache_dtype_v = f.v_dtype;
  c->kv_scales = f.scales;
  c->kv_turbo_qjl = f.turbo_qjl;
}

}  // namespace kvforge::cli
