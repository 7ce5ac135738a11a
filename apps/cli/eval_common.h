// eval_common.h — what the `eval` subcommands share: reading the --text file and making the
// engine, each printing why it failed (the caller returns the exit code).
#pragma once

#include <memory>
#include <string>

#include "kvforge/engine.h"

namespace kvforge::cli {

// False after printing "cannot read PATH".
bool ReadEvalText(const std::string& path, std::string* text);

// nullptr after printing the engine's error (exit code 1).
std::unique_ptr<Engine> CreateEvalEngine(const EngineConfig& config);

}  // namespace kvforge::cli
