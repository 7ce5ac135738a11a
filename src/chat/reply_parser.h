// chat/reply_parser.h — splits a model's reply, as it streams, into reasoning, content and tool
// calls (the assistant message's reasoning_content, content and tool_calls).
//
//   ReplyParser p(options);
//   for (each text delta) Send(p.Feed(delta));   // what is settled so far
//   Send(p.Finish());                            // the rest
//
// Reasoning (options.reasoning): the reply may open with <think> (leading whitespace allowed);
// everything up to </think> is reasoning, and the whitespace right after it is dropped. With
// starts_in_reasoning (the prompt itself ended inside <think>, as DeepSeek-R1's template does) the
// reply starts as reasoning. A reply that never closes the block is all reasoning.
//
// Tool calls (options.tool_format): text before the format's opening marker is content; from the
// marker on, each call is handed out once it is complete and parses (a JSON object of arguments);
// whatever does not parse, from the first such place on, is content after all (at Finish). For
// llama3_json the reply is calls only when it opens with '{' or <|python_tag|>.
//
// Feeding the whole reply at once and then Finish gives the same reasoning, content and calls as
// feeding it in any pieces: a streamed reply reassembles to the non-streamed one. Text that could
// still turn into a marker is held back until it cannot.
// Thread-safety: one parser per reply.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_calls.h"

namespace kvforge::chat {

struct ReplyOptions {
  bool reasoning = false;
  bool starts_in_reasoning = false;
  std::optional<ToolCallFormat> tool_format;  // nullopt: tool calls are not looked for
};

struct ReplyDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  void Append(ReplyDelta more);
};

class ReplyParser {
 public:
  explicit ReplyParser(const ReplyOptions& options);
  ReplyDelta Feed(std::string_view text);
  ReplyDelta Finish();

 private:
  enum class Phase { kBeforeThink, kThinking, kAfterThink, kBody };
  enum class Body { kUndecided, kText, kCalls, kPlain };
  // What the next piece of calls_ is.
  enum class Take { kCall, kWait, kDone, kFail };

  void FeedReasoning(ReplyDelta* out, bool final);
  void FeedBody(std::string_view text, ReplyDelta* out, bool final);
  void FeedText(ReplyDelta* out, bool final);
  void TakeCalls(ReplyDelta* out, bool final);
  // Reads one call (or the end of the calls) at the front of calls_, consuming what it reads.
  Take TakeOne(std::vector<ToolCall>* calls, bool final);
  Take TakeHermes(std::vector<ToolCall>* calls, bool final);
  Take TakeLlama3(std::vector<ToolCall>* calls, bool final);
  Take TakeMistral(std::vector<ToolCall>* calls, bool final);
  Take TakeDeepSeek(std::vector<ToolCall>* calls, bool final);

  ReplyOptions options_;
  Phase phase_;
  std::string think_;  // text not yet settled by the reasoning phases
  Body body_;
  std::string held_;          // kText: a suffix that may start the opening marker
  std::string calls_;         // kCalls: the text from the opening marker on, not yet handed out
  bool strip_space_ = false;  // after the calls: leading whitespace is dropped
};

// Feed(text) + Finish().
ReplyDelta ParseReply(const ReplyOptions& options, std::string_view text);

}  // namespace kvforge::chat
