// server/anthropic_codec.h — JSON <-> plain structs for Anthropic's Messages API (POST
// /v1/messages and /v1/messages/count_tokens), mapped onto the chat pipeline's ChatRequest.
//
// Requests are read strictly: a field kvforge does not implement (thinking, service_tier, image
// blocks, server tools, ...) is an InvalidArgument naming it in *param, never ignored; a JSON null
// counts as absent. Conversations become OpenAI-shaped template messages: the system prompt a
// "system" message, tool_use blocks an assistant message's tool_calls, tool_result blocks "tool"
// messages, text blocks joined with "\n"; thinking blocks of earlier turns are dropped (as
// Anthropic drops them). cache_control markers are accepted: the prefix cache is automatic.
// Encoders never fail (invalid UTF-8 in generated text becomes U+FFFD).
// nlohmann/json is included by anthropic_codec.cc only. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvforge/status.h"
#include "server/api_types.h"
#include "server/openai_codec.h"

namespace kvforge::server {

struct MessagesRequest {
  ChatRequest chat;
  // A conversation ending with an assistant turn: its text, which the reply continues (the
  // template is rendered without a generation prompt); empty otherwise.
  std::string prefill;
};

// `count_tokens`: the body of /v1/messages/count_tokens, where max_tokens is optional (the
// Messages fields are accepted so that a client can count the body it will send).
Status ParseMessagesRequest(std::string_view body, const CodecLimits& limits, bool count_tokens,
                            MessagesRequest* out, std::string* param);

enum class AnthropicBlockType { kText, kThinking, kToolUse };

struct AnthropicBlock {
  AnthropicBlockType type = AnthropicBlockType::kText;
  std::string text;        // kText: the text; kThinking: the reasoning
  std::string id;          // kToolUse: "toolu_..." (9 alphanumerics for Mistral templates)
  std::string name;        // kToolUse
  std::string input_json;  // kToolUse: the arguments, a JSON object's text (a delta: a piece)
};

// A reply (or, in message_start, its head: no content and no stop reason yet).
struct AnthropicMessage {
  std::string id;  // "msg_..."
  std::string model;
  std::vector<AnthropicBlock> content;
  std::string stop_reason;  // "end_turn" | "max_tokens" | "stop_sequence" | "tool_use"; empty: null
  std::string stop_sequence;  // the stop sequence that ended it; empty: null
  // input_tokens is written as the prompt tokens not read from the prefix cache,
  // cache_read_input_tokens as those read (Anthropic's split), output_tokens as completion_tokens.
  Usage usage;
};

std::string EncodeAnthropicMessage(const AnthropicMessage& m);
// The payloads of the stream's events, each carrying its "type" (the SSE event name).
std::string EncodeAnthropicMessageStart(const AnthropicMessage& head);
std::string EncodeAnthropicBlockStart(int32_t index, const AnthropicBlock& block);  // empty body
std::string EncodeAnthropicBlockDelta(int32_t index, const AnthropicBlock& piece);
std::string EncodeAnthropicBlockStop(int32_t index);
std::string EncodeAnthropicMessageDelta(const AnthropicMessage& end);  // stop reason and usage
std::string EncodeAnthropicMessageStop();
std::string EncodeAnthropicPing();
// {"type": "error", "error": {"type", "message"}}: the type from the HTTP status
// (invalid_request_error, authentication_error, not_found_error, request_too_large,
// rate_limit_error, overloaded_error, api_error), the message prefixed with the field at fault.
std::string EncodeAnthropicError(const ApiError& error);
std::string EncodeAnthropicTokenCount(int64_t input_tokens);

}  // namespace kvforge::server
