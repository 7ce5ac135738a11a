// kvforge/config_names.h — the text forms of EngineConfig (kvforge/engine_config.h): the names
// of every choice, and every field listed once by name, so that the CLI, the HTTP server and
// the Python module set options by name through one table (an option added to EngineConfig is
// added here, once, and every front end has it).
// Thread-safety: pure functions and an immutable table. No exception escapes.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kvforge/engine_config.h"
#include "kvforge/status.h"

namespace kvforge {

// Names, as the CLI, HTTP and Python spell them. Parse* accept the canonical names (and, for KV
// dtypes, the aliases fp32/fp16/half/bfloat16/fp8/e4m3/e5m2), case-insensitively; errors list
// the accepted names.
Result<KvCacheDtype> ParseKvCacheDtype(std::string_view text);
Result<BatchingMode> ParseBatchingMode(std::string_view text);
Result<PreemptionMode> ParsePreemptionMode(std::string_view text);
Result<SchedulingPolicy> ParseSchedulingPolicy(std::string_view text);
Result<PrefixCacheMode> ParsePrefixCacheMode(std::string_view text);
Result<MlaAttentionMode> ParseMlaAttentionMode(std::string_view text);
Result<KvOffloadCompression> ParseKvOffloadCompression(std::string_view text);
Result<KvOffloadWrite> ParseKvOffloadWrite(std::string_view text);
Result<SpeculativeMethod> ParseSpeculativeMethod(std::string_view text);
const char* ConfigName(KvCacheDtype v);          // "auto", "f16", "fp8_e4m3", ...
const char* ConfigName(BatchingMode v);          // "continuous" | "static"
const char* ConfigName(PreemptionMode v);        // "recompute" | "swap"
const char* ConfigName(SchedulingPolicy v);      // "fcfs" | "priority"
const char* ConfigName(PrefixCacheMode v);       // "hash" | "radix"
const char* ConfigName(MlaAttentionMode v);      // "auto" | "absorbed" | "naive"
const char* ConfigName(KvOffloadCompression v);  // "none" | "lz4" | "zstd"
const char* ConfigName(KvOffloadWrite v);        // "through" | "back"
const char* ConfigName(SpeculativeMethod v);     // "off" | "ngram" | "draft_model"
std::string KvCacheDtypeChoices();               // "auto|f32|f16|..." for usage text

enum class ConfigFieldKind { kBool, kInt, kUint, kFloat, kString, kChoice };

// Another command-line spelling of a field (without the leading "--"). With `value` set the flag
// takes no value and sets that one (--kv-f32 is kv_f16=false); otherwise it takes the field's.
struct ConfigAlias {
  std::string flag;
  std::string value;
};

// One EngineConfig member. Front ends derive everything from this row: the CLI flag is the name
// with '-' for '_' (ConfigFlagName) plus the aliases, Python's keyword is the name, --help shows
// the group, the help and the default (get(EngineConfig{})).
struct ConfigField {
  std::string name;  // the EngineConfig member's name
  ConfigFieldKind kind;
  std::string help;
  std::vector<std::string> choices;  // kChoice: the accepted names
  std::string group;                 // the section of --help it is listed in, e.g. "KV offload"
  bool byte_size = false;            // kUint byte counts: also 512MiB, 8GiB, 1.5GB
  // The field is also a request's own (SamplingParams::kv_policy: HTTP and Python per request),
  // there named `request_key` (kv_policy's "name", "budget", "sinks", ...).
  bool per_request = false;
  std::string request_key;
  std::vector<ConfigAlias> aliases;
  // Sets the field from its text form: "true"/"false" (also 1/0), a decimal number, a name.
  // Errors are kInvalidArgument naming the field and what it accepts.
  std::function<Status(EngineConfig&, std::string_view)> set;
  std::function<std::string(const EngineConfig&)> get;  // the same text form
};

const std::vector<ConfigField>& EngineConfigFields();
const ConfigField* FindConfigField(std::string_view name);  // nullptr when unknown
// One parameter of a request's own KV policy (SamplingParams::kv_policy) by its request name (a
// per_request field's request_key: name, budget, sinks, window, pool_kernel, beta, heads), in
// text form: HTTP and Python read a request's policy through the table. Unknown keys are
// kNotFound listing the accepted ones.
Status SetKvPolicyParam(KvPolicy* policy, std::string_view key, std::string_view text);
// Those request names, "name, budget, ...", for error messages.
std::string KvPolicyParamNames();

// "kv_offload_dtype" -> "kv-offload-dtype".
std::string ConfigFlagName(std::string_view field_name);
// Unknown names are kNotFound ("unknown engine option 'x'").
Status SetConfigField(EngineConfig* config, std::string_view name, std::string_view text);

}  // namespace kvforge
