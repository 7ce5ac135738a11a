// kvforge/finish_reason.h — why a sequence ended, for both engines (Engine and LLM/AsyncEngine).
#pragma once

namespace kvforge {

// OpenAI's / vLLM's names (FinishReasonName): "length" (max_tokens or the context), "stop" (an
// end-of-generation token, a stop token id or a stop string), "abort" (the caller gave up).
enum class FinishReason { kLength, kStop, kAbort };
const char* FinishReasonName(FinishReason r);

}  // namespace kvforge
