// server/responses_codec.h — JSON <-> plain structs for OpenAI's Responses API (POST
// /v1/responses), mapped onto the chat pipeline's ChatRequest.
//
// Requests are read strictly: a field kvforge does not implement (previous_response_id,
// conversation, reasoning, background, a non-empty include, hosted tools, image inputs, ...) is an
// InvalidArgument naming it in *param, never ignored; a JSON null counts as absent. `input`
// becomes OpenAI-shaped template messages: `instructions` a "system" message first, message items
// as they are (text parts joined with "\n"), function_call items the tool_calls of an assistant
// message, function_call_output items "tool" messages; reasoning items of earlier turns are
// dropped. text.format becomes the structured output constraint (openai_structured.h's forms).
// Nothing is stored, whatever `store` says. Encoders never fail (invalid UTF-8 in generated text
// becomes U+FFFD). nlohmann/json is included by responses_codec.cc only.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvforge/status.h"
#include "server/api_types.h"
#include "server/openai_codec.h"

namespace kvforge::server {

// The request fields a response object repeats, as the client sent them (JSON text, kept
// opaque here: only the codec reads it) or as their defaults.
struct ResponseEcho {
  std::string instructions = "null";
  std::string tools = "[]";
  std::string tool_choice = "\"auto\"";
  std::string text = "{\"format\":{\"type\":\"text\"}}";
  std::string metadata = "{}";
  std::string user = "null";
  double temperature = 1.0;  // as sent (the sampler's float would echo 0.7 as 0.69999...)
  double top_p = 1.0;
  int64_t max_output_tokens = 0;  // 0: not given (null)
  bool parallel_tool_calls = true;
};

struct ResponsesRequest {
  ChatRequest chat;
  ResponseEcho echo;
};

Status ParseResponsesRequest(std::string_view body, const CodecLimits& limits,
                             ResponsesRequest* out, std::string* param);

enum class ResponseItemType { kReasoning, kMessage, kFunctionCall };

struct ResponseItem {
  ResponseItemType type = ResponseItemType::kMessage;
  std::string id;                    // "rs_..." / "msg_..." / "fc_..."
  std::string status = "completed";  // "in_progress" | "completed" | "incomplete"
  std::string text;                  // kReasoning: the summary text; kMessage: the output text
  std::string call_id;               // kFunctionCall: "call_..."
  std::string name;
  std::string arguments;  // JSON text
};

struct ResponseObject {
  std::string id;  // "resp_..."
  int64_t created_at = 0;
  std::string status = "in_progress";  // "in_progress" | "completed" | "incomplete"
  std::string incomplete_reason;       // "max_output_tokens"; empty: incomplete_details null
  std::string model;
  std::vector<ResponseItem> output;
  bool with_usage = false;  // false: "usage": null (a stream's first events)
  Usage usage;
  ResponseEcho echo;
};

std::string EncodeResponse(const ResponseObject& r);

// The events of a streamed response; each payload carries its type (the SSE event name, from
// ResponseEventName) and sequence number.
enum class ResponseEventKind {
  kCreated,           // response.created {response}
  kInProgress,        // response.in_progress {response}
  kCompleted,         // response.completed {response}
  kIncomplete,        // response.incomplete {response}
  kItemAdded,         // response.output_item.added {output_index, item}
  kItemDone,          // response.output_item.done {output_index, item}
  kContentPartAdded,  // response.content_part.added {item_id, output_index, content_index, part}
  kContentPartDone,   // response.content_part.done (part with the whole text)
  kTextDelta,         // response.output_text.delta {..., delta}
  kTextDone,          // response.output_text.done {..., text}
  kArgumentsDelta,    // response.function_call_arguments.delta {item_id, output_index, delta}
  kArgumentsDone,     // response.function_call_arguments.done {..., name, arguments}
  kSummaryPartAdded,  // response.reasoning_summary_part.added {..., summary_index, part}
  kSummaryPartDone,   // response.reasoning_summary_part.done
  kSummaryDelta,      // response.reasoning_summary_text.delta {..., summary_index, delta}
  kSummaryDone,       // response.reasoning_summary_text.done {..., summary_index, text}
};

const char* ResponseEventName(ResponseEventKind kind);

struct ResponseEvent {
  ResponseEventKind kind = ResponseEventKind::kCreated;
  int64_t sequence_number = 0;
  const ResponseObject* response = nullptr;  // the lifecycle events
  const ResponseItem* item = nullptr;        // output item events; the item the others are of
  int32_t output_index = 0;
  std::string text;  // deltas: the piece; done and part events: the whole text (or arguments)
};

std::string EncodeResponseEvent(const ResponseEvent& e);
// The stream's `error` event: {"type": "error", "sequence_number", "code", "message", "param"}.
std::string EncodeResponseStreamError(const ApiError& error, int64_t sequence_number);

}  // namespace kvforge::server
