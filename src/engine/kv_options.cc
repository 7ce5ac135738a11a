#include "engine/kv_options.h"

#include "base/strings.h"
#include "kvpolicy/sparse_selection.h"
#include "kvquant/kivi.h"
#include "kvquant/nuq_calibration.h"
#include "kvquant/turbo.h"

namespace kvforge::engine {

using kvquant::KvDtype;

// The public enum is kvquant's with kAuto in front: one offset maps them, checked here for every
// dtype so that adding one to either enum without the other fails to compile.
constexpr bool SameAfterAuto(KvCacheDtype pub, KvDtype stored) {
  return static_cast<int>(pub) == static_cast<int>(stored) + 1;
}
static_assert(SameAfterAuto(KvCacheDtype::kF32, KvDtype::kF32) &&
              SameAfterAuto(KvCacheDtype::kF16, KvDtype::kF16) &&
              SameAfterAuto(KvCacheDtype::kBf16, KvDtype::kBf16) &&
              SameAfterAuto(KvCacheDtype::kFp8E4M3, KvDtype::kFp8E4M3) &&
              SameAfterAuto(KvCacheDtype::kFp8E5M2, KvDtype::kFp8E5M2) &&
              SameAfterAuto(KvCacheDtype::kInt8, KvDtype::kInt8) &&
              SameAfterAuto(KvCacheDtype::kQ8_0, KvDtype::kQ8_0) &&
              SameAfterAuto(KvCacheDtype::kQ4_0, KvDtype::kQ4_0) &&
              SameAfterAuto(KvCacheDtype::kKivi2, KvDtype::kKivi2) &&
              SameAfterAuto(KvCacheDtype::kKivi4, KvDtype::kKivi4) &&
              SameAfterAuto(KvCacheDtype::kKvQuant3, KvDtype::kKvQuant3) &&
              SameAfterAuto(KvCacheDtype::kTurbo3, KvDtype::kTurbo3) &&
              SameAfterAuto(KvCacheDtype::kTurbo4, KvDtype::kTurbo4));

KvDtype StoredKvDtype(KvCacheDtype choice, bool kv_f16) {
  if (choice == KvCacheDtype::kAuto) return kv_f16 ? KvDtype::kF16 : KvDtype::kF32;
  return static_cast<KvDtype>(static_cast<int>(choice) - 1);
}

KvCacheDtype PublicKvDtype(KvDtype stored) {
  return static_cast<KvCacheDtype>(static_cast<int>(stored) + 1);
}

Result<kvstore::PagedKvCacheConfig> MakeKvCacheConfig(const model::ModelConfig& mc,
                                                      const EngineConfig& choice) {
  const KvDtype base = StoredKvDtype(choice.kv_cache_dtype, choice.kv_f16);
  kvstore::PagedKvCacheConfig kc;
  // Sparse decode reads per-block key summaries, kept when the engine's policy needs them.
  kc.key_summaries = kvpolicy::IsSparse(choice.kv_policy.kind);
  kvstore::KvStoreConfig& s = kc.store;
  s.n_layer = static_cast<int32_t>(mc.n_layer);
  s.n_kv_head = static_cast<int32_t>(mc.n_head_kv);
  s.head_dim = static_cast<int32_t>(mc.head_dim);
  // MLA: one latent stream (kv_lora_rank + RoPE dims) stands for K and V (ADR 0007).
  s.latent_rank = static_cast<int32_t>(mc.mla.kv_lora_rank);
  s.k_dtype = base;
  s.v_dtype = base;
  if (choice.kv_cache_dtype_k != KvCacheDtype::kAuto)
    s.k_dtype = StoredKvDtype(choice.kv_cache_dtype_k, choice.kv_f16);
  if (choice.kv_cache_dtype_v != KvCacheDtype::kAuto)
    s.v_dtype = StoredKvDtype(choice.kv_cache_dtype_v, choice.kv_f16);
  s.block_tokens = choice.block_size;
  if (choice.kv_turbo_qjl && !kvquant::IsTurbo(s.k_dtype))
    return Status::InvalidArgument(
        "the QJL key sketch (kv_turbo_qjl / --kv-turbo-qjl) applies to turbo3 / turbo4 keys, "
        "but the K cache dtype is " +
        std::string(kvquant::KvDtypeName(s.k_dtype)));
  s.turbo_qjl = choice.kv_turbo_qjl;
  if (kvquant::IsKivi(s.k_dtype) && s.block_tokens % kvquant::kKiviGroup != 0)
    s.block_tokens = static_cast<int32_t>((s.block_tokens + kvquant::kKiviGroup - 1) /
                                          kvquant::kKiviGroup * kvquant::kKiviGroup);
  kc.kivi_residual_tokens = choice.kivi_residual_tokens;
  kc.kivi_eager = choice.kivi_eager;
  kc.nuq_post_rope_keys = choice.kvquant_post_rope_keys;
  kc.fp8_per_head = choice.kv_scales_per_head;
  const bool fp8 = kvquant::IsFp8(s.k_dtype) || kvquant::IsFp8(s.v_dtype);
  if (choice.kv_scales == "calibrate") {
    kc.fp8_calibrate = true;
  } else if (!choice.kv_scales.empty() && choice.kv_scales != "1" && fp8) {
    KVF_ASSIGN_OR_RETURN(kvquant::Fp8Scales scales,
                         kvquant::Fp8Scales::Load(choice.kv_scales, mc.n_layer, mc.n_head_kv));
    kc.fp8_scales = std::move(scales);
  }
  // kvquant3: keys are stored before RoPE, so the cache needs the model's rotation; the
  // calibration comes from a file (the same --kv-scales flag) or from the first batch.
  kc.rope.rot_dim = static_cast<int32_t>(mc.rope_dim > 0 ? mc.rope_dim : mc.head_dim);
  kc.rope.freq_base = mc.rope_freq_base;
  kc.rope.freq_scale = mc.rope_freq_scale;
  kc.rope.neox = mc.rope_neox;
  kc.rope.freq_factors = mc.rope_freq_factors;
  const bool nuq = kvquant::IsNuq(s.k_dtype) || kvquant::IsNuq(s.v_dtype);
  if (nuq && !choice.kv_scales.empty() && choice.kv_scales != "1" &&
      choice.kv_scales != "calibrate") {
    if (fp8)
      return Status::InvalidArgument(
          "one --kv-scales file cannot hold both FP8 scales and a kvquant3 calibration");
    KVF_ASSIGN_OR_RETURN(
        kvquant::NuqCalibration cal,
        kvquant::NuqCalibration::Load(choice.kv_scales, mc.n_layer, mc.n_head_kv * mc.head_dim));
    kc.nuq_calibration = std::move(cal);
  }
  // Validate the shape now, with a message naming the model's dimensions.
  Result<kvstore::KvLayout> layout = kvstore::KvLayout::Create(kvstore::StoreLayoutConfig(s));
  if (!layout.ok())
    return Status::InvalidArgument(
        base::StrFormat("KV cache dtype %s does not fit this model (%lld KV heads x %lld): %s",
                        KvDtypeLabel(s).c_str(), (long long)mc.n_head_kv, (long long)mc.head_dim,
                        layout.error().message().c_str()));
  return kc;
}

Result<uint64_t> KvBlockBytes(const kvstore::PagedKvCacheConfig& kc) {
  KVF_ASSIGN_OR_RETURN(kvstore::KvLayout layout,
                       kvstore::KvLayout::Create(kvstore::StoreLayoutConfig(kc.store)));
  return static_cast<uint64_t>(layout.BlockBytes());
}

int64_t KvBytesPerToken(const kvstore::PagedKvCacheConfig& kc) {
  kvstore::KvLayoutConfig lc = kvstore::StoreLayoutConfig(kc.store);
  lc.block_tokens = kvquant::kKiviGroup;  // any valid block size: the rate does not depend on it
  Result<kvstore::KvLayout> layout = kvstore::KvLayout::Create(lc);
  return layout.ok() ? layout->BytesPerToken() : 0;
}

std::string KvDtypeLabel(const kvstore::KvStoreConfig& sc) {
  // QJL keys are another format than the values' turbo rows: "k=turbo4+qjl,v=turbo4".
  const bool qjl = sc.turbo_qjl && kvquant::IsTurbo(sc.k_dtype);
  if (sc.k_dtype == sc.v_dtype && !qjl) return std::string(kvquant::KvDtypeName(sc.k_dtype));
  return "k=" + std::string(kvquant::KvDtypeName(sc.k_dtype)) + (qjl ? "+qjl" : "") +
         ",v=" + std::string(kvquant::KvDtypeName(sc.v_dtype));
}

std::string DescribeKvCache(const kvstore::PagedKvCache& cache) {
  const kvstore::KvStore& st = cache.store();
  const kvstore::KvStoreConfig& sc = st.config();
  kvstore::PagedKvCacheConfig kc;
  kc.store = sc;
  const int64_t per_token = KvBytesPerToken(kc);
  kc.store.k_dtype = kc.store.v_dtype = KvDtype::kF16;
  const int64_t f16_per_token = KvBytesPerToken(kc);
  std::string extra;
  if (kvquant::IsFp8(sc.k_dtype) || kvquant::IsFp8(sc.v_dtype))
    extra += base::StrFormat(
        ", fp8 scales %s %s", cache.fp8_scales().per_head() ? "per head" : "per tensor",
        cache.fp8_scales().calibrated(0) ? "fixed" : "calibrated on the first batch");
  if (kvquant::IsNuq(sc.k_dtype) || kvquant::IsNuq(sc.v_dtype))
    extra += base::StrFormat(", kvquant3 calibration %s", cache.nuq_calibration().calibrated(0)
                                                              ? "loaded from a file"
                                                              : "fitted on text");
  if (kvquant::IsTurbo(sc.k_dtype) || kvquant::IsTurbo(sc.v_dtype))
    extra += base::StrFormat(", turbo format v%d%s", kvquant::kTurboFormatVersion,
                             sc.turbo_qjl ? " (K: QJL residual sketch)" : "");
  if (cache.has_sequence_state())
    extra += base::StrFormat(
        ", KIVI f16 window outside the blocks: up to %lld B per sequence",
        (long long)(cache.kivi_residual_tokens() * sc.n_layer * sc.n_kv_head * sc.head_dim * 2 *
                    ((kvquant::IsKivi(sc.k_dtype) ? 1 : 0) +
                     (kvquant::IsKivi(sc.v_dtype) ? 1 : 0))));
  return base::StrFormat(
      "KV cache: %s, %lld B/token incl. scales (f16: %lld B, %.2fx the tokens per byte), stored "
      "%llu B/token with row padding; %lld blocks x %d tokens = %lld tokens, %s%s",
      KvDtypeLabel(sc).c_str(), (long long)per_token, (long long)f16_per_token,
      per_token > 0 ? static_cast<double>(f16_per_token) / static_cast<double>(per_token) : 0.0,
      (unsigned long long)st.bytes_per_token(), (long long)cache.num_blocks(), sc.block_tokens,
      (long long)(cache.num_blocks() * sc.block_tokens), base::HumanBytes(st.total_bytes()).c_str(),
      extra.c_str());
}

}  // namespace kvforge::engine
