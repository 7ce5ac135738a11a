// config_file.h — `--config FILE.yaml`: flag values from a YAML file (vLLM's form), overridden
// by the flags given on the command line.
//
//   # kvforge.yaml
//   model: /var/lib/kvforge/model.gguf
//   port: 8000
//   enable_prefix_caching: true      # '-' or '_' in keys, as in vLLM
//   allowed-origins: ["https://app.example.com"]
//
// The file is a mapping of flag names (without "--") to scalars or lists of scalars (a list is
// passed as comma-separated text). A true switch is the bare flag, a false one `--name=false`
// where the flag takes it and nothing otherwise. Unknown keys, nested mappings, empty values and
// YAML syntax errors are refused, naming the key or line.
#pragma once

#include <string>
#include <vector>

#include "flags.h"
#include "kvforge/status.h"

namespace kvforge::cli {

// The command-line arguments the file stands for, checked against `parser`'s flags.
Result<std::vector<std::string>> ReadConfigFile(const std::string& path, const FlagParser& parser);

// `args` with the file of its `--config FILE` (if any) read in front of them, so that the
// command line wins. Without --config, `args` unchanged.
Result<std::vector<std::string>> WithConfigFile(const FlagParser& parser,
                                                const std::vector<std::string>& args);

}  // namespace kvforge::cli
