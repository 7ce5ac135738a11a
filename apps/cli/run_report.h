// run_report.h — the JSON lines `kvforge run --json` prints: one per request of --prompts-file
// (the batched engine's RequestOutput), or the single prompt's GenerationResult.
#pragma once

#include <string>

#include "kvforge/engine.h"
#include "kvforge/llm.h"

namespace kvforge::cli {

std::string RequestOutputJson(const RequestOutput& o);  // one line, '\n'-terminated
std::string GenerationResultJson(const GenerationResult& r);

}  // namespace kvforge::cli
