// server/chat_reply.h — a chat reply read for tool calls and reasoning (chat::ReplyParser) and
// written into the API's Choice: content, reasoning_content, tool_calls with fresh ids, and
// finish_reason "tool_calls" when the reply ended by calling.
// Thread-safety: a ChoiceReply belongs to one choice of one response.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "chat/reply_parser.h"
#include "kvforge/status.h"
#include "server/api_types.h"

namespace kvforge::server {

// How one request's replies are read.
struct ReplyPlan {
  chat::ReplyOptions options;
  bool with_reasoning = false;  // write reasoning_content
  bool mistral_ids = false;     // call ids of 9 letters and digits (Mistral templates demand it)
};

// The reasoning part of a ReplyPlan for a rendered prompt: reasoning is read when `parser_on`
// unless the prompt closed the block itself (a template told not to think); it starts inside
// the block when the prompt opened it.
void PlanReasoning(bool parser_on, const std::string& prompt, ReplyPlan* plan);

// The reply plan of a chat request (nullopt: the reply is plain content) and what its tools
// need of the sampling: tool_choice required or named becomes the grammar of the calls; a
// reasoning reply gets its constraint deferred past </think>; control-token markers (Mistral's
// [TOOL_CALLS], Llama's <|python_tag|>) are kept in the text when calls are read. Errors name
// the field in *param.
Status PlanChatReply(const ToolRequest& tools, chat::ToolCallFormat format, bool reasoning_parser,
                     const std::string& prompt, SamplingParams* params,
                     std::optional<ReplyPlan>* plan, std::string* param);

// A tool-call id from two random words: "call_" + 24 hex digits, or 9 alphanumerics.
std::string ToolCallId(bool mistral, uint64_t a, uint64_t b);

class ChoiceReply {
 public:
  ChoiceReply(const ReplyPlan& plan, std::function<std::string()> new_id)
      : plan_(plan), parser_(plan.options), new_id_(std::move(new_id)) {}
  // The settled part of the reply so far, into `out`'s text, reasoning and tool_calls (call
  // indices count on from the previous ones). False when there is nothing to send.
  bool Feed(const std::string& text, Choice* out);
  bool Finish(Choice* out);
  // The finish reason to send: "tool_calls" for a reply that called and stopped.
  std::string FinishReason(const std::string& engine_reason) const;

 private:
  bool Put(chat::ReplyDelta d, Choice* out);

  ReplyPlan plan_;
  chat::ReplyParser parser_;
  std::function<std::string()> new_id_;
  int32_t calls_ = 0;
};

// A whole (non-streamed) reply read at once into `out`.
void ReadWholeReply(const ReplyPlan& plan, const std::function<std::string()>& new_id,
                    const std::string& text, const std::string& engine_reason, Choice* out);

}  // namespace kvforge::server
