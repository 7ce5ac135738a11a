// eval_common.h — what the `eval` subcommands share: reading the --text file and making the
// engine from --model / --threads / a context length and the KV flags, each printing why it
// failed (the caller returns the exit code).
#pragma once

#include <memory>
#include <string>

#include "kv_flags.h"
#include "kvforge/engine.h"

namespace kvforge::cli {

// False after printing "cannot read PATH".
bool ReadEvalText(const std::string& path, std::string* text);

// The engine config of an evaluation: model path, threads, context; then the KV flags. Returns
// 0, or the exit code after printing the bad flag (2).
int EvalEngineConfig(const std::string& model, int64_t threads, int64_t ctx, const KvFlags& kv,
                     EngineConfig* out);

// nullptr after printing the engine's error (exit code 1).
std::unique_ptr<Engine> CreateEvalEngine(const EngineConfig& config);

}  // namespace kvforge::cli
