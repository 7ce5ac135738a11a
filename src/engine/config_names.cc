#include "kvforge/config_names.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "base/strings.h"
#include "engine/kv_options.h"
#include "kvquant/kv_dtype.h"

namespace kvforge {
namespace {

using base::StrFormat;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

template <typename E, size_t N>
Result<E> ParseName(std::string_view text, const char* what, const E (&values)[N]) {
  const std::string t = Lower(text);
  std::string names;
  for (E v : values) {
    if (t == ConfigName(v)) return v;
    names += std::string(names.empty() ? "" : ", ") + ConfigName(v);
  }
  return Status::InvalidArgument(StrFormat("%s must be one of %s (got '%.*s')", what, names.c_str(),
                                           static_cast<int>(text.size()), text.data()));
}

constexpr BatchingMode kBatching[] = {BatchingMode::kContinuous, BatchingMode::kStatic};
constexpr PreemptionMode kPreemption[] = {PreemptionMode::kRecompute, PreemptionMode::kSwap};
constexpr SchedulingPolicy kPolicies[] = {SchedulingPolicy::kFcfs, SchedulingPolicy::kPriority};
constexpr PrefixCacheMode kPrefixModes[] = {PrefixCacheMode::kHash, PrefixCacheMode::kRadix};
constexpr MlaAttentionMode kMlaModes[] = {MlaAttentionMode::kAuto, MlaAttentionMode::kAbsorbed,
                                          MlaAttentionMode::kNaive};
constexpr KvOffloadCompression kOffloadCompression[] = {
    KvOffloadCompression::kNone, KvOffloadCompression::kLz4, KvOffloadCompression::kZstd};
constexpr KvOffloadWrite kOffloadWrite[] = {KvOffloadWrite::kThrough, KvOffloadWrite::kBack};
constexpr SpeculativeMethod kSpecMethods[] = {SpeculativeMethod::kOff, SpeculativeMethod::kNgram,
                                              SpeculativeMethod::kDraftModel};

// --- the field table ----------------------------------------------------------------------------

Status Bad(const std::string& field, const char* wants, std::string_view text) {
  return Status::InvalidArgument(StrFormat("%s must be %s (got '%.*s')", field.c_str(), wants,
                                           static_cast<int>(text.size()), text.data()));
}

ConfigField Row(const char* name, ConfigFieldKind kind, const char* help) {
  ConfigField f;
  f.name = name;
  f.kind = kind;
  f.help = help;
  return f;
}

ConfigField Bool(const char* name, bool EngineConfig::*m, const char* help) {
  ConfigField f = Row(name, ConfigFieldKind::kBool, help);
  f.set = [m, n = f.name](EngineConfig& c, std::string_view t) {
    const std::string v = Lower(t);
    if (v == "true" || v == "1") {
      c.*m = true;
    } else if (v == "false" || v == "0") {
      c.*m = false;
    } else {
      return Bad(n, "true or false", t);
    }
    return Status::Ok();
  };
  f.get = [m](const EngineConfig& c) { return std::string(c.*m ? "true" : "false"); };
  return f;
}

// Integers of any width, range-checked; `min` is the smallest accepted value.
template <typename T>
ConfigField Int(const char* name, T EngineConfig::*m, long long min, const char* help) {
  ConfigField f =
      Row(name, std::is_unsigned_v<T> ? ConfigFieldKind::kUint : ConfigFieldKind::kInt, help);
  f.set = [m, min, n = f.name](EngineConfig& c, std::string_view t) {
    const std::string s(t);
    char* end = nullptr;
    errno = 0;
    if (std::is_unsigned_v<T>) {
      const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
      if (s.empty() || *end != '\0' || errno != 0 || s[0] == '-' ||
          v > static_cast<unsigned long long>(std::numeric_limits<T>::max()) ||
          v < static_cast<unsigned long long>(min))
        return Bad(n, StrFormat("an integer >= %lld", min).c_str(), t);
      c.*m = static_cast<T>(v);
    } else {
      const long long v = std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end != '\0' || errno != 0 || v < min ||
          v > static_cast<long long>(std::numeric_limits<T>::max()))
        return Bad(n, StrFormat("an integer >= %lld", min).c_str(), t);
      c.*m = static_cast<T>(v);
    }
    return Status::Ok();
  };
  f.get = [m](const EngineConfig& c) { return std::to_string(c.*m); };
  return f;
}

// A byte count: a decimal number of bytes, or one with a unit (512MiB, 8GiB, 1.5GB).
ConfigField Bytes(const char* name, uint64_t EngineConfig::*m, uint64_t min, const char* help) {
  ConfigField f = Row(name, ConfigFieldKind::kUint, help);
  f.byte_size = true;
  f.set = [m, min, n = f.name](EngineConfig& c, std::string_view t) {
    uint64_t v = 0;
    if (!base::ParseByteSize(t, &v) || v < min)
      return Bad(
          n, StrFormat("a byte size >= %llu (e.g. 512MiB, 8GiB)", (unsigned long long)min).c_str(),
          t);
    c.*m = v;
    return Status::Ok();
  };
  f.get = [m](const EngineConfig& c) { return std::to_string(c.*m); };
  return f;
}

// A finite double in [lo, hi]; `wants` is the error's wording of that range.
ConfigField Number(const char* name, double EngineConfig::*m, double lo, double hi,
                   const char* wants, const char* help) {
  ConfigField f = Row(name, ConfigFieldKind::kFloat, help);
  f.set = [m, lo, hi, wants, n = f.name](EngineConfig& c, std::string_view t) {
    const std::string s(t);
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) return Bad(n, wants, t);
    c.*m = v;
    return Status::Ok();
  };
  f.get = [m](const EngineConfig& c) { return StrFormat("%g", c.*m); };
  return f;
}

ConfigField Fraction(const char* name, double EngineConfig::*m, const char* help) {
  return Number(name, m, 0, 1, "a number in [0, 1]", help);
}

ConfigField NonNegative(const char* name, double EngineConfig::*m, const char* help) {
  return Number(name, m, 0, std::numeric_limits<double>::max(), "a finite number >= 0", help);
}

ConfigField Text(const char* name, std::string EngineConfig::*m, const char* help) {
  ConfigField f = Row(name, ConfigFieldKind::kString, help);
  f.set = [m](EngineConfig& c, std::string_view t) {
    c.*m = std::string(t);
    return Status::Ok();
  };
  f.get = [m](const EngineConfig& c) { return c.*m; };
  return f;
}

template <typename E, size_t N>
ConfigField Choice(const char* name, E EngineConfig::*m, const E (&values)[N], const char* help) {
  ConfigField f = Row(name, ConfigFieldKind::kChoice, help);
  for (E v : values) f.choices.emplace_back(ConfigName(v));
  f.set = [m, &values, n = f.name](EngineConfig& c, std::string_view t) -> Status {
    KVF_ASSIGN_OR_RETURN(E v, ParseName(t, n.c_str(), values));
    c.*m = v;
    return Status::Ok();
  };
  f.get = [m](const EngineConfig& c) { return std::string(ConfigName(c.*m)); };
  return f;
}

ConfigField Dtype(const char* name, KvCacheDtype EngineConfig::*m, const char* help) {
  ConfigField f = Row(name, ConfigFieldKind::kChoice, help);
  for (int i = 0; i <= static_cast<int>(KvCacheDtype::kTurbo4); ++i)
    f.choices.emplace_back(ConfigName(static_cast<KvCacheDtype>(i)));
  f.set = [m, n = f.name](EngineConfig& c, std::string_view t) -> Status {
    Result<KvCacheDtype> v = ParseKvCacheDtype(t);
    if (!v.ok()) return v.error().WithContext(n);
    c.*m = *v;
    return Status::Ok();
  };
  f.get = [m](const EngineConfig& c) { return std::string(ConfigName(c.*m)); };
  return f;
}

// A KvPolicy member: `parse` reads the text into the policy (the field name for errors).
ConfigField PolicyField(
    const char* name, ConfigFieldKind kind, const char* help,
    std::function<Status(KvPolicy&, std::string_view, const std::string&)> parse,
    std::function<std::string(const KvPolicy&)> print) {
  ConfigField f = Row(name, kind, help);
  f.per_request = true;  // SamplingParams::kv_policy carries the same fields
  f.set = [parse, n = f.name](EngineConfig& c, std::string_view t) {
    return parse(c.kv_policy, t, n);
  };
  f.get = [print](const EngineConfig& c) { return print(c.kv_policy); };
  return f;
}

// Integer KvPolicy members in [min, 2^20].
ConfigField PolicyInt(const char* name, int32_t KvPolicy::*m, long long min, const char* help) {
  return PolicyField(
      name, ConfigFieldKind::kInt, help,
      [m, min](KvPolicy& p, std::string_view t, const std::string& n) -> Status {
        const std::string s(t);
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || errno != 0 || v < min || v > (1 << 20))
          return Bad(n, StrFormat("an integer in [%lld, 1048576]", min).c_str(), t);
        p.*m = static_cast<int32_t>(v);
        return Status::Ok();
      },
      [m](const KvPolicy& p) { return std::to_string(p.*m); });
}

Result<double> ParseNumber(std::string_view t, const std::string& n, const char* wants) {
  const std::string s(t);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v)) return Bad(n, wants, t);
  return v;
}

std::vector<ConfigField> PolicyFields() {
  std::vector<ConfigField> f;
  ConfigField kind = PolicyField(
      "kv_policy", ConfigFieldKind::kChoice, "KV eviction policy (docs/kv_cache.md#eviction)",
      [](KvPolicy& p, std::string_view t, const std::string& n) -> Status {
        Result<KvPolicyKind> k = ParseKvPolicyKind(Lower(t));
        if (!k.ok()) return k.error().WithContext(n);
        p.kind = *k;
        return Status::Ok();
      },
      [](const KvPolicy& p) { return std::string(KvPolicyName(p.kind)); });
  for (int i = 0; i <= static_cast<int>(KvPolicyKind::kNsa); ++i)
    kind.choices.emplace_back(KvPolicyName(static_cast<KvPolicyKind>(i)));
  f.push_back(std::move(kind));
  f.push_back(PolicyField(
      "kv_budget", ConfigFieldKind::kFloat,
      "KV tokens kept per sequence (>= 1), or a fraction of the prompt (0 < b < 1)",
      [](KvPolicy& p, std::string_view t, const std::string& n) -> Status {
        KVF_ASSIGN_OR_RETURN(double v, ParseNumber(t, n, "a token count >= 1 or a fraction"));
        if (v < 0 || (v > 1 && v != std::floor(v)) || v > 1e9)
          return Bad(n, "a whole token count >= 1 or a fraction in (0, 1)", t);
        p.budget = v;
        return Status::Ok();
      },
      [](const KvPolicy& p) { return StrFormat("%g", p.budget); }));
  f.push_back(PolicyInt("kv_sinks", &KvPolicy::sinks, 0, "streaming: attention sinks kept"));
  f.push_back(PolicyInt("kv_window", &KvPolicy::window, -1,
                        "recent / observation window (-1: the method's default)"));
  f.push_back(PolicyInt("kv_pool_kernel", &KvPolicy::pool_kernel, 1,
                        "snapkv/pyramidkv: score pooling width (odd)"));
  f.push_back(PolicyField(
      "kv_pyramid_beta", ConfigFieldKind::kFloat, "pyramidkv: layer budget slope parameter",
      [](KvPolicy& p, std::string_view t, const std::string& n) -> Status {
        KVF_ASSIGN_OR_RETURN(double v, ParseNumber(t, n, "a number >= 1"));
        if (v < 1 || v > 1e6) return Bad(n, "a number >= 1", t);
        p.beta = static_cast<float>(v);
        return Status::Ok();
      },
      [](const KvPolicy& p) { return StrFormat("%g", static_cast<double>(p.beta)); }));
  ConfigField heads = PolicyField(
      "kv_heads", ConfigFieldKind::kChoice,
      "which KV heads share a kept set: shared (one per layer), per_head, adaptive (AdaKV)",
      [](KvPolicy& p, std::string_view t, const std::string& n) -> Status {
        Result<KvHeadSelection> h = ParseKvHeadSelection(Lower(t));
        if (!h.ok()) return h.error().WithContext(n);
        p.heads = *h;
        return Status::Ok();
      },
      [](const KvPolicy& p) { return std::string(KvHeadSelectionName(p.heads)); });
  heads.choices = {"shared", "per_head", "adaptive"};
  f.push_back(std::move(heads));
  // Their names inside a request's kv_policy object, in the order above.
  const char* request_keys[] = {"name",        "budget", "sinks", "window",
                                "pool_kernel", "beta",   "heads"};
  for (size_t i = 0; i < f.size(); ++i) f[i].request_key = request_keys[i];
  return f;
}

// The disk tier's directory; "DIR:SIZE" also sets kv_offload_disk_bytes.
ConfigField DiskTier() {
  ConfigField f = Text("kv_offload_disk", &EngineConfig::kv_offload_disk,
                       "disk KV offload tier directory, DIR or DIR:SIZE (SIZE sets "
                       "kv_offload_disk_bytes; '': off)");
  f.set = [](EngineConfig& c, std::string_view t) -> Status {
    std::string dir(t);
    if (const size_t colon = dir.rfind(':'); colon != std::string::npos) {
      const std::string size = dir.substr(colon + 1);
      uint64_t bytes = 0;
      if (!base::ParseByteSize(size, &bytes) || bytes == 0)
        return Status::InvalidArgument("kv_offload_disk: bad size '" + size +
                                       "' (DIR:SIZE, e.g. /var/cache/kv:50GiB)");
      dir.resize(colon);
      if (dir.empty()) return Status::InvalidArgument("kv_offload_disk: empty directory");
      c.kv_offload_disk_bytes = bytes;
    }
    c.kv_offload_disk = dir;
    return Status::Ok();
  };
  return f;
}

// Appends `f` to `fields` in `group`, with its other command-line spellings.
void Add(std::vector<ConfigField>* fields, const char* group, ConfigField f,
         std::vector<ConfigAlias> aliases = {}) {
  f.group = group;
  f.aliases = std::move(aliases);
  fields->push_back(std::move(f));
}

std::vector<ConfigField> MakeFields() {
  using C = EngineConfig;
  std::vector<ConfigField> v;
  const char* g = "model and threads";
  Add(&v, g, Text("model", &C::model, "GGUF model path (empty: the embedded stories260K model)"));
  Add(&v, g, Int("threads", &C::threads, 0, "compute threads (0: one per core)"));
  Add(&v, g,
      Int("max_model_len", &C::max_model_len, 0, "context length (0: the model's, at most 8192)"),
      {{"ctx", ""}});
  Add(&v, g, Bool("mlock", &C::mlock, "pin the model's weights in RAM"));
  g = "KV memory";
  Add(&v, g,
      Bytes("kv_cache_memory_bytes", &C::kv_cache_memory_bytes, 0,
            "KV pool budget, e.g. 512MiB (0: see memory_utilization)"),
      {{"kv-cache-memory", ""}});
  Add(&v, g,
      Fraction("memory_utilization", &C::memory_utilization,
               "fraction of available RAM minus the weights for the KV pool (0: a full context "
               "per running sequence, at most 40% of available RAM)"));
  Add(&v, g, Int("block_size", &C::block_size, 1, "KV block, tokens"));
  g = "KV dtype";
  Add(&v, g, Dtype("kv_cache_dtype", &C::kv_cache_dtype, "KV cache dtype, K and V"),
      {{"kv-dtype", ""}});
  Add(&v, g,
      Dtype("kv_cache_dtype_k", &C::kv_cache_dtype_k, "K cache dtype (auto: kv_cache_dtype)"),
      {{"kv-dtype-k", ""}});
  Add(&v, g,
      Dtype("kv_cache_dtype_v", &C::kv_cache_dtype_v, "V cache dtype (auto: kv_cache_dtype)"),
      {{"kv-dtype-v", ""}});
  Add(&v, g, Bool("kv_f16", &C::kv_f16, "kv_cache_dtype auto means f16 (false: f32)"),
      {{"kv-f32", "false"}});
  Add(&v, g,
      Text("kv_scales", &C::kv_scales,
           "FP8 scales / kvquant3 calibration: '' (FP8 1.0; kvquant3 the built-in text), "
           "'calibrate' (the first batch) or a file"));
  Add(&v, g, Bool("kv_scales_per_head", &C::kv_scales_per_head, "one FP8 scale per KV head"));
  Add(&v, g,
      Int("kivi_residual_tokens", &C::kivi_residual_tokens, 0,
          "KIVI: newest tokens kept in f16 (a multiple of 32)"),
      {{"kivi-residual", ""}});
  Add(&v, g, Bool("kivi_eager", &C::kivi_eager, "KIVI: quantize before the step's attention"));
  Add(&v, g,
      Bool("kvquant_post_rope_keys", &C::kvquant_post_rope_keys,
           "kvquant3 ablation: quantize keys after RoPE"),
      {{"kvquant-post-rope", "true"}});
  Add(&v, g,
      Bool("kv_turbo_qjl", &C::kv_turbo_qjl,
           "turbo3/turbo4 keys: (b-1)-bit codes + a 1-bit QJL sketch of the residual"));
  Add(&v, g,
      Choice("mla_attention", &C::mla_attention, kMlaModes,
             "deepseek2: absorbed (MQA over the latents), naive (per-head K/V), or auto (the "
             "cheaper form per chunk)"));
  g = "scheduling";
  Add(&v, g,
      Int("max_num_batched_tokens", &C::max_num_batched_tokens, 1, "tokens per forward step"));
  Add(&v, g, Int("max_num_seqs", &C::max_num_seqs, 1, "running sequences per step"));
  Add(&v, g, Bool("chunked_prefill", &C::chunked_prefill, "split long prompts across steps"));
  Add(&v, g,
      Int("long_prefill_token_threshold", &C::long_prefill_token_threshold, 0,
          "largest prefill chunk per step (0: the token budget)"));
  Add(&v, g,
      NonNegative("max_itl_ms", &C::max_itl_ms,
                  "decode-priority chunking: cut a step's prefill so the step's predicted time "
                  "stays within this many ms while sequences decode (0: off)"));
  Add(&v, g,
      Int("min_prefill_chunk", &C::min_prefill_chunk, 1,
          "decode-priority chunking: most prefill tokens a step with decodes always carries "
          "(fewer when they would add over a quarter of max_itl_ms)"));
  Add(&v, g,
      NonNegative("max_ttft_ms", &C::max_ttft_ms,
                  "decode-priority chunking: leave a step's prefill uncut while a prompt would "
                  "otherwise get its first token later than this many ms (0: never)"));
  Add(&v, g, Choice("batching", &C::batching, kBatching, "continuous, or static (a baseline)"));
  Add(&v, g,
      Choice("preemption_mode", &C::preemption_mode, kPreemption,
             "what preemption does with a sequence's KV"),
      {{"preemption", ""}});
  Add(&v, g,
      Bytes("swap_space_bytes", &C::swap_space_bytes, 0,
            "host memory for swapped-out KV blocks (preemption_mode swap)"));
  Add(&v, g,
      Choice("scheduling_policy", &C::scheduling_policy, kPolicies,
             "fcfs, or priority (lower first)"));
  Add(&v, g,
      Bool("contiguous_kv", &C::contiguous_kv,
           "baseline: reserve max_model_len slots per sequence (measurement)"));
  g = "prefix caching";
  Add(&v, g,
      Bool("enable_prefix_caching", &C::enable_prefix_caching, "reuse KV of cached prefixes"));
  Add(&v, g,
      Choice("prefix_cache_mode", &C::prefix_cache_mode, kPrefixModes,
             "hash (vLLM-style block hashes) or radix (SGLang-style tree)"));
  g = "KV offload tiers";
  Add(&v, g,
      Bytes("kv_offload_ram_bytes", &C::kv_offload_ram_bytes, 0,
            "host-RAM KV offload tier capacity, e.g. 8GiB (0: off)"),
      {{"kv-offload-ram", ""}});
  Add(&v, g, DiskTier());
  Add(&v, g,
      Bytes("kv_offload_disk_bytes", &C::kv_offload_disk_bytes, 1,
            "disk KV offload tier capacity"));
  Add(&v, g,
      Int("kv_offload_chunk_tokens", &C::kv_offload_chunk_tokens, 1,
          "tokens per offloaded chunk (a multiple of block_size)"),
      {{"kv-offload-chunk", ""}});
  Add(&v, g,
      Int("kv_offload_prefetch_requests", &C::kv_offload_prefetch_requests, 0,
          "waiting requests whose chunks are fetched while the requests ahead compute (0: off)"),
      {{"kv-offload-prefetch", ""}});
  Add(&v, g,
      Int("kv_offload_load_timeout_ms", &C::kv_offload_load_timeout_ms, 1,
          "longest wait for a request's chunks from the tiers, ms (then it recomputes them)"),
      {{"kv-offload-load-timeout", ""}});
  Add(&v, g,
      Choice("kv_offload_compression", &C::kv_offload_compression, kOffloadCompression,
             "offloaded chunks: none, lz4 or zstd"));
  Add(&v, g,
      Dtype("kv_offload_dtype", &C::kv_offload_dtype,
            "offloaded chunks transcoded to this smaller dtype (f16, bf16, int8, q8_0, q4_0; "
            "auto: as the KV cache holds them)"));
  Add(&v, g,
      Choice("kv_offload_write", &C::kv_offload_write, kOffloadWrite,
             "write chunks down the tiers when computed (through) or when the hot pool drops "
             "them (back)"));
  Add(&v, g,
      Text("kv_offload_redis", &C::kv_offload_redis,
           "shared Redis KV offload tier, redis://[:PASS@]HOST[:PORT][,HOST:PORT...][/DB]; "
           "several hosts (or one cluster node) mean a Redis Cluster ('': off)"));
  Add(&v, g,
      Int("kv_offload_redis_timeout_ms", &C::kv_offload_redis_timeout_ms, 1,
          "Redis tier time-out per connect/read/write, ms (then a miss)"),
      {{"kv-offload-redis-timeout", ""}});
  Add(&v, g,
      Int("kv_offload_redis_ttl_s", &C::kv_offload_redis_ttl_s, 0,
          "Redis tier record expiry, seconds (0: never)"),
      {{"kv-offload-redis-ttl", ""}});
  g = "speculative decoding";
  Add(&v, g,
      Choice("speculative_method", &C::speculative_method, kSpecMethods,
             "off, ngram (prompt lookup) or draft_model (speculative_model)"),
      {{"spec-type", ""}});
  Add(&v, g,
      Text("speculative_model", &C::speculative_model,
           "draft GGUF, same vocabulary (implies draft_model)"),
      {{"model-draft", ""}});
  Add(&v, g,
      Int("num_speculative_tokens", &C::num_speculative_tokens, 1,
          "most tokens drafted per sequence and step"),
      {{"draft-max", ""}});
  Add(&v, g, Int("prompt_lookup_max", &C::prompt_lookup_max, 1, "n-gram: longest suffix matched"));
  Add(&v, g, Int("prompt_lookup_min", &C::prompt_lookup_min, 1, "n-gram: shortest suffix matched"));
  Add(&v, g,
      Dtype("speculative_kv_cache_dtype", &C::speculative_kv_cache_dtype,
            "the draft model's KV dtype (auto: f16)"));
  Add(&v, g,
      Bool("speculative_adaptive", &C::speculative_adaptive,
           "draft what the acceptance rate and the step cost pay for (false: always k)"));
  for (ConfigField& p : PolicyFields()) Add(&v, "KV eviction (also per request)", std::move(p));
  return v;
}

}  // namespace

Result<KvCacheDtype> ParseKvCacheDtype(std::string_view text) {
  if (Lower(text) == "auto") return KvCacheDtype::kAuto;
  Result<kvquant::KvDtype> d = kvquant::ParseKvDtype(text);
  if (!d.ok())
    return Status::InvalidArgument(StrFormat("unknown KV cache dtype '%.*s' (choose %s)",
                                             static_cast<int>(text.size()), text.data(),
                                             KvCacheDtypeChoices().c_str()));
  return engine::PublicKvDtype(*d);
}

Result<BatchingMode> ParseBatchingMode(std::string_view t) {
  return ParseName(t, "batching", kBatching);
}
Result<PreemptionMode> ParsePreemptionMode(std::string_view t) {
  return ParseName(t, "preemption_mode", kPreemption);
}
Result<SchedulingPolicy> ParseSchedulingPolicy(std::string_view t) {
  return ParseName(t, "scheduling_policy", kPolicies);
}
Result<PrefixCacheMode> ParsePrefixCacheMode(std::string_view t) {
  return ParseName(t, "prefix_cache_mode", kPrefixModes);
}
Result<KvOffloadCompression> ParseKvOffloadCompression(std::string_view t) {
  return ParseName(t, "kv_offload_compression", kOffloadCompression);
}
Result<KvOffloadWrite> ParseKvOffloadWrite(std::string_view t) {
  return ParseName(t, "kv_offload_write", kOffloadWrite);
}
Result<SpeculativeMethod> ParseSpeculativeMethod(std::string_view t) {
  return ParseName(t, "speculative_method", kSpecMethods);
}
Result<MlaAttentionMode> ParseMlaAttentionMode(std::string_view t) {
  return ParseName(t, "mla_attention", kMlaModes);
}

const char* ConfigName(KvCacheDtype v) {
  if (v == KvCacheDtype::kAuto) return "auto";
  return kvquant::KvDtypeName(engine::StoredKvDtype(v, true)).data();
}
const char* ConfigName(BatchingMode v) {
  return v == BatchingMode::kStatic ? "static" : "continuous";
}
const char* ConfigName(PreemptionMode v) {
  return v == PreemptionMode::kSwap ? "swap" : "recompute";
}
const char* ConfigName(SchedulingPolicy v) {
  return v == SchedulingPolicy::kPriority ? "priority" : "fcfs";
}
const char* ConfigName(PrefixCacheMode v) {
  return v == PrefixCacheMode::kRadix ? "radix" : "hash";
}
const char* ConfigName(KvOffloadCompression v) {
  return v == KvOffloadCompression::kZstd ? "zstd"
                                          : (v == KvOffloadCompression::kLz4 ? "lz4" : "none");
}
const char* ConfigName(KvOffloadWrite v) { return v == KvOffloadWrite::kBack ? "back" : "through"; }
const char* ConfigName(SpeculativeMethod v) {
  return v == SpeculativeMethod::kNgram
             ? "ngram"
             : (v == SpeculativeMethod::kDraftModel ? "draft_model" : "off");
}
const char* ConfigName(MlaAttentionMode v) {
  return v == MlaAttentionMode::kAbsorbed ? "absorbed"
                                          : (v == MlaAttentionMode::kNaive ? "naive" : "auto");
}

std::string KvCacheDtypeChoices() { return "auto|" + kvquant::KvDtypeChoices(); }

const std::vector<ConfigField>& EngineConfigFields() {
  static const std::vector<ConfigField> fields = MakeFields();
  return fields;
}

std::string KvPolicyParamNames() {
  std::string names;
  for (const ConfigField& f : EngineConfigFields())
    if (f.per_request) names += (names.empty() ? "" : ", ") + f.request_key;
  return names;
}

Status SetKvPolicyParam(KvPolicy* policy, std::string_view key, std::string_view text) {
  for (const ConfigField& f : EngineConfigFields()) {
    if (!f.per_request || f.request_key != key) continue;
    EngineConfig c;
    c.kv_policy = *policy;
    KVF_RETURN_IF_ERROR(f.set(c, text));
    *policy = c.kv_policy;
    return Status::Ok();
  }
  return Status::NotFound(StrFormat("unknown kv_policy parameter '%.*s' (%s)",
                                    static_cast<int>(key.size()), key.data(),
                                    KvPolicyParamNames().c_str()));
}

std::string ConfigFlagName(std::string_view field_name) {
  std::string flag(field_name);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

const ConfigField* FindConfigField(std::string_view name) {
  for (const ConfigField& f : EngineConfigFields())
    if (f.name == name) return &f;
  return nullptr;
}

Status SetConfigField(EngineConfig* config, std::string_view name, std::string_view text) {
  const ConfigField* f = FindConfigField(name);
  if (f == nullptr)
    return Status::NotFound(
        StrFormat("unknown engine option '%.*s'", static_cast<int>(name.size()), name.data()));
  return f->set(*config, text);
}

}  // namespace kvforge
