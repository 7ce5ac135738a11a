// server/chat_reply.cc — see chat_reply.h.
#include "server/chat_reply.h"

#include "base/strings.h"
#include "server/tool_grammar.h"

namespace kvforge::server {

namespace {

bool EndsWithMarker(const std::string& s, const std::string& marker) {
  size_t e = s.size();
  while (e > 0 && (s[e - 1] == ' ' || s[e - 1] == '\n' || s[e - 1] == '\r' || s[e - 1] == '\t'))
    --e;
  return e >= marker.size() && s.compare(e - marker.size(), marker.size(), marker) == 0;
}

}  // namespace

void PlanReasoning(bool parser_on, const std::string& prompt, ReplyPlan* plan) {
  plan->options.reasoning = parser_on && !EndsWithMarker(prompt, "</think>");
  plan->options.starts_in_reasoning = plan->options.reasoning && EndsWithMarker(prompt, "<think>");
  plan->with_reasoning = parser_on;
}

Status PlanChatReply(const ToolRequest& tools, chat::ToolCallFormat format, bool reasoning_parser,
                     const std::string& prompt, SamplingParams* params,
                     std::optional<ReplyPlan>* plan, std::string* param) {
  const bool calls = !tools.tools.empty() && tools.choice != ToolChoiceMode::kNone;
  if (!calls && !reasoning_parser) return Status::Ok();
  ReplyPlan p;
  PlanReasoning(reasoning_parser, prompt, &p);
  if (calls) {
    p.options.tool_format = format;
    p.mistral_ids = format == chat::ToolCallFormat::kMistral;
    params->skip_special_tokens = false;
  }
  StructuredOutputs& so = params->structured_outputs;
  if (tools.choice == ToolChoiceMode::kRequired || tools.choice == ToolChoiceMode::kNamed) {
    if (so.enabled()) {
      *param = "tool_choice";
      return Status::InvalidArgument(
          "'tool_choice' required or named already constrains the reply: it cannot be combined "
          "with response_format, structured_outputs or a grammar");
    }
    auto gbnf = ToolCallGbnf(format, tools);
    if (!gbnf.ok()) {
      *param = "tools";
      return gbnf.status();
    }
    so.grammar = std::move(*gbnf);
  }
  if (so.enabled() && p.options.reasoning) {
    so.reasoning_end = "</think>";
    so.reasoning_start = p.options.starts_in_reasoning ? "" : "<think>";
  }
  *plan = std::move(p);
  return Status::Ok();
}

std::string ToolCallId(bool mistral, uint64_t a, uint64_t b) {
  if (!mistral)
    return base::StrFormat("call_%016llx%08llx", (unsigned long long)a,
                           (unsigned long long)(b & 0xFFFFFFFFull));
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id;
  for (int i = 0; i < 9; ++i) {
    id += kAlnum[a % 62];
    a = a / 62 + (b << 7);
    b >>= 7;
  }
  return id;
}

bool ChoiceReply::Put(chat::ReplyDelta d, Choice* out) {
  out->text = std::move(d.content);
  out->reasoning = std::move(d.reasoning);
  for (chat::ToolCall& c : d.tool_calls) {
    ToolCallOut t;
    t.index = calls_++;
    t.id = new_id_();
    t.name = std::move(c.name);
    t.arguments = std::move(c.arguments);
    out->tool_calls.push_back(std::move(t));
  }
  return !out->text.empty() || !out->reasoning.empty() || !out->tool_calls.empty();
}

bool ChoiceReply::Feed(const std::string& text, Choice* out) {
  return Put(parser_.Feed(text), out);
}

bool ChoiceReply::Finish(Choice* out) { return Put(parser_.Finish(), out); }

std::string ChoiceReply::FinishReason(const std::string& engine_reason) const {
  return calls_ > 0 && engine_reason == "stop" ? "tool_calls" : engine_reason;
}

void ReadWholeReply(const ReplyPlan& plan, const std::function<std::string()>& new_id,
                    const std::string& text, const std::string& engine_reason, Choice* out) {
  ChoiceReply reply(plan, new_id);
  Choice whole;
  (void)reply.Feed(text, &whole);
  Choice rest;
  (void)reply.Finish(&rest);
  out->text = whole.text + rest.text;
  out->reasoning = whole.reasoning + rest.reasoning;
  out->with_reasoning = plan.with_reasoning;
  out->tool_calls = std::move(whole.tool_calls);
  for (ToolCallOut& t : rest.tool_calls) out->tool_calls.push_back(std::move(t));
  out->finish_reason = reply.FinishReason(engine_reason);
}

}  // namespace kvforge::server
