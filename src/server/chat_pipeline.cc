// server/chat_pipeline.cc — see chat_pipeline.h.
#include "server/chat_pipeline.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace kvforge::server {
namespace {

Status AbortedStatus(const ChatPipeline& p) {
  return p.ShuttingDown() ? Status::Unavailable("the server is shutting down")
                          : Status::Internal("the engine aborted the request");
}

// The rendered prompt; with a prefill, cut right after the final assistant turn's text so that
// the reply continues it (the template closes the turn after the text: that part goes).
Result<std::string> RenderPrompt(const ChatPipeline& p, const ChatInput& in,
                                 const std::string& prefill) {
  KVF_ASSIGN_OR_RETURN(std::string text, p.Render(in));
  if (prefill.empty()) return text;
  const size_t at = text.rfind(prefill);
  if (at == std::string::npos)
    return Status::InvalidArgument(
        "the chat template does not write the final assistant turn's text as it is, so the "
        "reply cannot continue it");
  text.resize(at + prefill.size());
  return text;
}

Usage PromptUsage(const RunningChat& run, const RequestOutput& o) {
  Usage u;
  u.prompt_tokens = run.prompt_tokens;
  u.cached_tokens = o.metrics.cached_tokens;
  return u;
}

}  // namespace

Result<std::vector<int32_t>> ChatPromptIds(const ChatPipeline& p, const ChatInput& in,
                                           const std::string& prefill) {
  KVF_ASSIGN_OR_RETURN(std::string text, RenderPrompt(p, in, prefill));
  return p.Tokenize(text);
}

std::optional<RunningChat> StartChat(ChatPipeline& p, ChatRequest req, const std::string& prefill,
                                     const char* messages_param, std::function<bool()> client_gone,
                                     PipelineError* err) {
  auto fail = [err](Status s, std::string param, std::string code = "") {
    *err = {std::move(s), std::move(param), std::move(code)};
    return std::nullopt;
  };
  if (Status s = p.CheckModel(req.gen.model); !s.ok()) return fail(s, "model", "model_not_found");
  Result<std::string> text = RenderPrompt(p, req.chat, prefill);
  if (!text.ok()) return fail(text.error(), messages_param);
  Result<std::vector<int32_t>> ids = p.Tokenize(*text);
  if (!ids.ok()) return fail(ids.error(), messages_param);
  RunningChat run;
  std::string param;
  if (Status s = p.PlanReply(req.tools, *text, &req.gen.params, &run.reply, &param); !s.ok())
    return fail(s, param);
  run.prompt_tokens = static_cast<int64_t>(ids->size());
  run.guard = p.Submit(req.gen, std::move(*ids), err);
  if (!run.guard) return std::nullopt;
  run.client_gone = std::move(client_gone);
  return run;
}

Result<ChatOutcome> CollectChat(ChatPipeline& p, const RunningChat& run) {
  Call& call = *run.guard->call;
  // Woken at every step that advances the call, so a client that hung up is noticed within a
  // step and its KV blocks freed (as Collect does for chat completions).
  const auto wake = std::chrono::milliseconds(std::max(1, p.keepalive_ms()));
  std::vector<RequestOutput> finals;
  while (!call.WaitFinals(&finals, wake)) {
    if (run.client_gone && run.client_gone()) {
      call.AbortAll(run.guard->engine);
      return Status::Cancelled("the client closed the connection");
    }
  }
  const RequestOutput& o = finals.at(0);
  if (AnyAborted(o)) return AbortedStatus(p);
  const CompletionOutput& c = o.outputs[0];
  ChatOutcome out;
  out.finish_reason = c.finish_reason;
  if (run.reply) {
    // Fed at once, then finished: what a stream of it gives (chat_reply.h reads any split alike).
    ChoiceReply reply(*run.reply, p.ToolCallIds(run.reply->mistral_ids));
    out.pieces.resize(2);
    (void)reply.Feed(c.text, &out.pieces[0]);
    (void)reply.Finish(&out.pieces[1]);
    out.finish_reason = reply.FinishReason(c.finish_reason);
  } else {
    out.pieces.emplace_back().text = c.text;
  }
  out.stop_string = c.stop_string;
  out.usage = PromptUsage(run, o);
  out.usage.completion_tokens = static_cast<int64_t>(c.token_ids.size());
  return out;
}

void StreamChat(ChatPipeline& p, const RunningChat& run, ReplyListener& listener) {
  Call& call = *run.guard->call;
  std::optional<ChoiceReply> reply;
  if (run.reply) reply.emplace(*run.reply, p.ToolCallIds(run.reply->mistral_ids));
  const auto keepalive = std::chrono::milliseconds(std::max(1, p.keepalive_ms()));
  bool started = false;
  bool ok = true;
  while (ok) {
    Call::Event ev;
    if (!call.Next(&ev, keepalive)) {
      ok = listener.KeepAlive();
      continue;
    }
    const RequestOutput& o = ev.out;
    if (o.finished && AnyAborted(o)) {
      listener.Failed(AbortedStatus(p));
      break;
    }
    if (!started) {
      started = true;
      ok = listener.Started(PromptUsage(run, o));
    }
    const std::string delta = o.delta_text.empty() ? std::string() : o.delta_text[0];
    if (ok && !delta.empty()) {
      Choice piece;
      if (!reply.has_value()) {
        piece.text = delta;
        ok = listener.Piece(piece);
      } else if (reply->Feed(delta, &piece)) {
        ok = listener.Piece(piece);
      }
    }
    if (!ok || !o.finished) continue;
    const CompletionOutput& c = o.outputs[0];
    ChatOutcome out;
    out.finish_reason = c.finish_reason;
    if (reply.has_value()) {
      Choice rest;
      if (reply->Finish(&rest)) ok = listener.Piece(rest);
      out.finish_reason = reply->FinishReason(c.finish_reason);
    }
    out.stop_string = c.stop_string;
    out.usage = PromptUsage(run, o);
    out.usage.completion_tokens = static_cast<int64_t>(c.token_ids.size());
    if (ok) listener.Finished(out);
    return;
  }
  call.AbortAll(run.guard->engine);  // the client is gone (or the engine gave up): free KV now
}

}  // namespace kvforge::server
