// engine_flags.h — every EngineConfig field as a command-line flag, generated from the option
// table (kvforge/config_names.h), so a new engine option is one field, one table row and its use:
//   --NAME VALUE        the field's own name with '-' for '_' (kv_offload_dtype ->
//                       --kv-offload-dtype); switches are --NAME, --NAME=false or --no-NAME
//   the table's aliases (--kv-dtype, --kv-f32, --kivi-residual, --ctx, --preemption, ...)
//   --prefix-cache off|hash|radix   shorthand for enable_prefix_caching + prefix_cache_mode
// Each flag writes into the config the command passed; its defaults (a command may set its own
// first, e.g. serve's max_itl_ms) are what --help shows, by the table's groups. A spelling the
// command already uses for something of its own (eval's --ctx) stays the command's.
#pragma once

#include <string_view>
#include <vector>

#include "flags.h"
#include "kvforge/engine_config.h"

namespace kvforge::cli {

void AddEngineFlags(FlagParser& p, EngineConfig* config);

// A command that uses only some fields (the forward-pass benchmarks) refuses the others: every
// field of `config` not in `used` must still hold its default, or kInvalidArgument names it.
Status RefuseUnusedEngineFields(const EngineConfig& config,
                                const std::vector<std::string_view>& used,
                                std::string_view command);

}  // namespace kvforge::cli
