// model_file.h — the GGUF a subcommand reads: the file at --model, or the model embedded in the
// binary when --model is absent (every subcommand that takes a model defaults the same way).
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf_reader.h"
#include "kvforge/status.h"

namespace kvforge::cli {

// An empty path means the embedded stories260K model.
Result<std::unique_ptr<gguf::GgufFile>> OpenModelFile(const std::string& path);

}  // namespace kvforge::cli
