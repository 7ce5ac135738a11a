// server/api_types.h — the plain structs that cross the server's internal boundaries.
//
// The codec (openai_codec.cc, the only TU that sees JSON) turns request bodies into these structs
// and these structs into response bodies; routes and the server logic work on them only. Field
// names follow the OpenAI / vLLM wire names where one exists. Types and ranges the codec can check
// from the JSON alone are already checked when a struct reaches the server.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"
#include "kvforge/sampling_params.h"

namespace kvforge::server {

// An OpenAI-style error: {"error": {"message", "type", "param", "code"}} sent with http_status.
struct ApiError {
  int http_status = 500;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending request field; empty: null
  std::string code;   // a short machine-readable code; empty: null
};

// One prompt of a completions request: text, or token ids given by the client.
struct Prompt {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> tokens;
};

// Fields shared by /v1/completions and /v1/chat/completions.
struct GenerationFields {
  std::string model;              // empty: not given (the served model)
  SamplingParams params;          // OpenAI defaults: temperature 1, top_p 1, top_k and min_p off
  bool max_tokens_given = false;  // false: completions default 16, chat: the rest of the context
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t priority = 0;        // lower runs earlier under --scheduling-policy priority (vLLM)
  std::string cache_salt;      // prefix-cache isolation: only equal salts share cached KV
  int32_t logprobs = -1;       // -1: none; else alternatives per token (0..20)
  bool echo = false;           // completions: prepend the prompt text to each choice
};

struct CompletionRequest {
  GenerationFields gen;
  std::vector<Prompt> prompts;  // at least one
};

// A conversation for the chat template.
struct ChatInput {
  std::vector<std::pair<std::string, std::string>> messages;  // (role, content text) for checks
  // The messages for the template, converted once from the request's JSON (chat_values.h): every
  // field the client sent, with `content` normalised to a string (text parts joined with "\n").
  chat::Value template_messages;
  chat::Value tools;  // a list, or undefined when absent
  // chat_template_kwargs: extra template variables.
  std::vector<std::pair<std::string, chat::Value>> template_kwargs;
  bool add_generation_prompt = true;
};

// A function the model may call (OpenAI's tools[i].function).
struct ToolFunction {
  std::string name;             // [A-Za-z0-9_-]{1,64}
  std::string parameters_json;  // a JSON Schema object; empty: any object of arguments
};

enum class ToolChoiceMode { kAuto, kNone, kRequired, kNamed };

// tools, tool_choice and parallel_tool_calls of a chat request.
struct ToolRequest {
  std::vector<ToolFunction> tools;
  ToolChoiceMode choice = ToolChoiceMode::kAuto;  // OpenAI's default with tools ("none" without)
  std::string named;                              // kNamed: the function
  bool parallel = true;                           // parallel_tool_calls
};

struct ChatRequest {
  GenerationFields gen;
  ChatInput chat;
  ToolRequest tools;
};

// POST /tokenize (vLLM): either a prompt or messages.
struct TokenizeRequest {
  std::string model;
  bool is_chat = false;
  std::string prompt;
  ChatInput chat;
  bool add_special_tokens = true;
  bool add_special_tokens_given = false;
  bool return_token_strs = false;
};

struct TokenizeResponse {
  std::vector<int32_t> tokens;
  std::vector<std::string> token_strs;  // sent only when requested
  bool with_token_strs = false;
  int64_t max_model_len = 0;
};

// POST /detokenize (vLLM).
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

// One generated token's log-probability and the most likely alternatives.
struct TokenLogprob {
  std::string token;  // the token's text piece (may be an incomplete UTF-8 sequence)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};

// One tool call of a chat reply (or of a chunk: `index` counts the choice's calls from 0).
struct ToolCallOut {
  int32_t index = 0;
  std::string id;
  std::string name;
  std::string arguments;  // JSON text
};

struct Choice {
  int32_t index = 0;
  std::string text;             // completion text, chat message content, or a chunk's delta
  std::string reasoning;        // chat: reasoning_content (a reasoning parser is on)
  bool with_reasoning = false;  // write reasoning_content (null when empty) in a full reply
  std::vector<ToolCallOut> tool_calls;
  std::string finish_reason;  // "stop" | "length"; empty: null (a chunk before the last)
  bool with_logprobs = false;
  std::vector<TokenLogprob> logprobs;
  int64_t text_offset = 0;   // completions logprobs: where `text`'s first token starts
  bool role_delta = false;   // chat chunk: this delta announces role "assistant"
  bool empty_delta = false;  // chat chunk: the delta is {} (the closing chunk of a choice)
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt_tokens_details.cached_tokens (prefix-cache hits)
};

// A completion, chat completion, or one streamed chunk of either.
struct GenerationResponse {
  std::string id;
  int64_t created = 0;  // unix seconds
  std::string model;
  std::vector<Choice> choices;
  bool with_usage = false;  // write "usage": {...}
  bool null_usage = false;  // write "usage": null (chunks when include_usage is set)
  Usage usage;
};

struct ModelCard {
  std::string id;
  int64_t created = 0;
  std::string owned_by = "kvforge";
  int64_t max_model_len = 0;
};

// What a streaming client (bench serve, tests) reads out of one SSE data payload.
struct StreamChunk {
  bool is_error = false;
  std::string error_message;
  std::string text;  // choices' text / delta.content, concatenated
  int32_t num_choices = 0;
  std::string finish_reason;  // the last non-null finish_reason seen, if any
  bool with_usage = false;
  Usage usage;
};

// The body `kvforge bench serve` sends.
struct BenchRequest {
  std::string model;
  bool chat = false;
  std::string prompt;  // the prompt, or the single user message when chat
  int32_t max_tokens = 128;
  bool ignore_eos = true;  // fixed output lengths (vLLM extension; others ignore it)
  float temperature = 0;
};

}  // namespace kvforge::server
