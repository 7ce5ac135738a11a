// server/openai_codec.h — JSON <-> api_types for the OpenAI / vLLM HTTP API.
//
// nlohmann/json is included by openai_codec.cc (and inspector_codec.cc for the web page) only;
// everything here takes and returns plain strings and structs. Parsing is strict about types and
// lenient about presence: unknown fields are ignored, a JSON null counts as "not given", a field of
// the wrong type or out of its range is an InvalidArgument naming the field in *param. Bodies must
// be UTF-8 JSON objects of at most `max_depth` nesting levels; invalid UTF-8 (also in escapes: lone
// surrogates) is rejected. Encoders never fail: invalid UTF-8 in generated text is written as
// U+FFFD. Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_calls.h"
#include "kvforge/status.h"
#include "server/api_types.h"

namespace kvforge::server {

struct CodecLimits {
  int max_depth = 64;        // nesting of arrays/objects in a request body
  size_t max_prompts = 256;  // prompts in one completions request
  size_t max_stop = 16;      // stop strings
  size_t max_stop_bytes = 1024;
  // Chat message roles accepted beyond the API's (system, developer, user, assistant, tool,
  // function): those the model's chat template names (chat::RolesNamedByTemplate).
  std::vector<std::string> template_roles;
  // Set when the chat template does not read `tool_calls`: assistant calls in the history are
  // then written into the content in this format (else the model would never see them).
  std::optional<chat::ToolCallFormat> tool_calls_as_text;
};

// Request decoders. On error the Status is kInvalidArgument and *param names the field ("" when
// the body as a whole is at fault).
Status ParseCompletionRequest(std::string_view body, const CodecLimits& limits,
                              CompletionRequest* out, std::string* param);
Status ParseChatRequest(std::string_view body, const CodecLimits& limits, ChatRequest* out,
                        std::string* param);
Status ParseTokenizeRequest(std::string_view body, const CodecLimits& limits, TokenizeRequest* out,
                            std::string* param);
Status ParseDetokenizeRequest(std::string_view body, const CodecLimits& limits,
                              DetokenizeRequest* out, std::string* param);

// Response encoders (compact JSON, one line: fit for an SSE data field).
std::string EncodeError(const ApiError& error);
std::string EncodeCompletion(const GenerationResponse& r);       // object "text_completion"
std::string EncodeCompletionChunk(const GenerationResponse& r);  // object "text_completion"
std::string EncodeChatCompletion(const GenerationResponse& r);   // object "chat.completion"
std::string EncodeChatChunk(const GenerationResponse& r);        // object "chat.completion.chunk"
std::string EncodeModels(const std::vector<ModelCard>& models);
std::string EncodeTokenize(const TokenizeResponse& r);
std::string EncodeDetokenize(const std::string& prompt);
std::string EncodeHealth(bool ok);

// Client side (bench serve): the request body, and what one SSE data payload says.
std::string EncodeBenchRequest(const BenchRequest& r);
Result<StreamChunk> DecodeStreamChunk(std::string_view data);
// The first model id of a GET /v1/models body.
Result<std::string> DecodeFirstModelId(std::string_view body);

}  // namespace kvforge::server
