// server/chat_pipeline.h — the chat pipeline of /v1/chat/completions, offered to the other API
// shapes the server speaks (Anthropic's Messages, OpenAI's Responses): a conversation rendered
// with the chat template and tokenized, its reply planned (tool calls, reasoning), checked,
// admitted and submitted like a chat completion; then the reply collected whole, or streamed as
// the settled pieces chat_reply.h reads. Each API only parses its request into a ChatRequest and
// writes the outcome in its own shape.
//
// Thread-safety: a ChatPipeline is shared by the HTTP workers (its implementation locks inside);
// a RunningChat and a ReplyListener belong to one request's worker.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvforge/status.h"
#include "server/api_types.h"
#include "server/call.h"
#include "server/chat_reply.h"
#include "server/openai_codec.h"

namespace kvforge::server {

// A failure before the engine runs, for each API to write in its own error shape.
struct PipelineError {
  Status status;
  std::string param;  // the request field at fault; empty: none
  std::string code;   // OpenAI's short code ("context_length_exceeded"); empty: none
};

// What the server gives the API shapes (implemented over Server::State in server.cc).
class ChatPipeline {
 public:
  virtual ~ChatPipeline() = default;
  virtual const std::string& model_id() const = 0;
  // What request bodies may hold (and how tool calls reach templates that do not read them).
  virtual const CodecLimits& limits() const = 0;
  // kNotFound naming the served model when `model` is neither empty nor the served one.
  virtual Status CheckModel(const std::string& model) const = 0;
  // The chat template's text for a conversation (template errors are kInvalidArgument).
  virtual Result<std::string> Render(const ChatInput& in) const = 0;
  // Token ids of rendered chat text, as a chat completion tokenizes it (special tokens parsed,
  // a BOS unless the text already starts with it).
  virtual Result<std::vector<int32_t>> Tokenize(const std::string& rendered) const = 0;
  // PlanChatReply with the server's tool-call format and reasoning parser.
  virtual Status PlanReply(const ToolRequest& tools, const std::string& prompt,
                           SamplingParams* params, std::optional<ReplyPlan>* plan,
                           std::string* param) const = 0;
  // The checks, admission (429 beyond capacity) and submission of a chat completion with one
  // prompt. The returned guard aborts the engine request when released; null on failure (*err).
  virtual std::shared_ptr<AbortOnRelease> Submit(const GenerationFields& gen,
                                                 std::vector<int32_t> prompt,
                                                 PipelineError* err) = 0;
  // "<prefix>" + 32 random hex digits.
  virtual std::string NewId(const char* prefix) = 0;
  virtual std::function<std::string()> ToolCallIds(bool mistral) = 0;
  virtual bool ShuttingDown() const = 0;
  virtual int keepalive_ms() const = 0;
};

// A chat request submitted to the engine.
struct RunningChat {
  std::shared_ptr<AbortOnRelease> guard;  // the Call, and the abort when released
  std::optional<ReplyPlan> reply;         // unset: the reply is plain text
  std::function<bool()> client_gone;      // the HTTP request's (may be null)
  int64_t prompt_tokens = 0;
};

// Renders, tokenizes, plans and submits. `prefill` non-empty: the conversation ends with an
// assistant turn of that text, which the reply continues (the template is rendered without a
// generation prompt and cut right after the text). Null on failure (*err; the prompt's faults
// name `messages_param`).
std::optional<RunningChat> StartChat(ChatPipeline& p, ChatRequest req, const std::string& prefill,
                                     const char* messages_param, std::function<bool()> client_gone,
                                     PipelineError* err);

// The prompt token ids of a conversation exactly as StartChat would submit them.
Result<std::vector<int32_t>> ChatPromptIds(const ChatPipeline& p, const ChatInput& in,
                                           const std::string& prefill);

// How a reply ended.
struct ChatOutcome {
  std::string finish_reason;  // "stop", "length", or "tool_calls" when it ended by calling
  std::string stop_string;    // the stop string that ended it; empty: none did
  Usage usage;
  // CollectChat: the whole reply as the settled pieces a stream of it gives, in reply order
  // (reasoning, then text, then calls within a piece), so that an API writes its blocks or
  // items in the same order whether streamed or not. Streamed: empty (the pieces went out).
  std::vector<Choice> pieces;
};

// Waits for the reply, aborting it when the client goes. kCancelled: the client is gone;
// kUnavailable: the server is shutting down; kInternal: the engine aborted it.
Result<ChatOutcome> CollectChat(ChatPipeline& p, const RunningChat& run);

// A streamed reply's receiver; a method returning false means the client is gone.
class ReplyListener {
 public:
  virtual ~ReplyListener() = default;
  // The first engine output arrived: the prompt's usage (prompt and cached tokens) is known.
  virtual bool Started(const Usage& prompt_usage) = 0;
  // Settled reasoning, then text, then calls (any of them empty), in reply order.
  virtual bool Piece(const Choice& piece) = 0;
  // The end (after the last piece).
  virtual bool Finished(const ChatOutcome& outcome) = 0;
  // Nothing arrived for the keep-alive interval.
  virtual bool KeepAlive() = 0;
  // The engine aborted the reply (shutdown: kUnavailable; else kInternal).
  virtual void Failed(const Status& status) = 0;
};

// Runs on the HTTP worker after the 200 headers went out, until the reply ends or the client
// goes (then the engine request is aborted at once).
void StreamChat(ChatPipeline& p, const RunningChat& run, ReplyListener& listener);

}  // namespace kvforge::server
