// server/responses_api.cc — see responses_api.h.
#include "server/responses_api.h"

#include <ctime>
#include <memory>
#include <string>
#include <utility>

#include "server/responses_codec.h"
#include "server/routes.h"
#include "server/sse.h"

namespace kvforge::server {
namespace {

// The shared pipeline names chat completions' fields; these are the Responses API's names.
std::string ResponsesParam(const std::string& param) {
  if (param == "messages") return "input";
  if (param == "max_tokens") return "max_output_tokens";
  return param;
}

HttpResponse Error(const Status& s, const std::string& param = "", const std::string& code = "") {
  ApiError e = ErrorFromStatus(s, ResponsesParam(param));
  if (!code.empty()) e.code = code;
  return ErrorResponse(e);
}

ResponseItem NewItem(ChatPipeline& p, ResponseItemType type) {
  ResponseItem item;
  item.type = type;
  item.id = p.NewId(type == ResponseItemType::kReasoning ? "rs_" : "msg_");
  return item;
}

ResponseItem CallItem(ChatPipeline& p, const ToolCallOut& t) {
  ResponseItem item;
  item.type = ResponseItemType::kFunctionCall;
  item.id = p.NewId("fc_");
  item.call_id = t.id;
  item.name = t.name;
  item.arguments = t.arguments;
  return item;
}

bool Truncated(const ChatOutcome& o) { return o.finish_reason == "length"; }

void SetEnd(const ChatOutcome& o, ResponseObject* r) {
  r->status = Truncated(o) ? "incomplete" : "completed";
  if (Truncated(o)) r->incomplete_reason = "max_output_tokens";
  r->with_usage = true;
  r->usage = o.usage;
}

// The stream of one response: reasoning and text open an output item (with its part) that
// following pieces of the same kind extend; each call is an item of its own, whole at once.
class ResponseStream final : public ReplyListener {
 public:
  ResponseStream(StreamSink& sink, ChatPipeline& p, ResponseObject head)
      : sink_(sink), p_(p), resp_(std::move(head)) {}

  bool Begin() {
    return Emit(ResponseEventKind::kCreated, -1) && Emit(ResponseEventKind::kInProgress, -1);
  }

  bool Started(const Usage&) override { return true; }

  bool Piece(const Choice& piece) override {
    if (!piece.reasoning.empty() && !Append(ResponseItemType::kReasoning, piece.reasoning))
      return false;
    if (!piece.text.empty() && !Append(ResponseItemType::kMessage, piece.text)) return false;
    for (const ToolCallOut& t : piece.tool_calls) {
      if (!Close("completed")) return false;
      ResponseItem item = CallItem(p_, t);
      item.status = "in_progress";
      item.arguments.clear();
      resp_.output.push_back(std::move(item));
      const int i = Last();
      if (!Emit(ResponseEventKind::kItemAdded, i) ||
          !Emit(ResponseEventKind::kArgumentsDelta, i, t.arguments))
        return false;
      resp_.output[i].arguments = t.arguments;
      resp_.output[i].status = "completed";
      if (!Emit(ResponseEventKind::kArgumentsDone, i, t.arguments) ||
          !Emit(ResponseEventKind::kItemDone, i))
        return false;
    }
    return true;
  }

  bool Finished(const ChatOutcome& outcome) override {
    if (!Close(Truncated(outcome) ? "incomplete" : "completed")) return false;
    SetEnd(outcome, &resp_);
    return Emit(Truncated(outcome) ? ResponseEventKind::kIncomplete : ResponseEventKind::kCompleted,
                -1);
  }

  bool KeepAlive() override { return sink_.Write(kSseKeepAlive); }

  void Failed(const Status& status) override {
    (void)sink_.Write(
        SseNamedEvent("error", EncodeResponseStreamError(ErrorFromStatus(status), seq_++)));
  }

 private:
  int Last() const { return static_cast<int>(resp_.output.size()) - 1; }

  // One event of the response (`item` < 0) or of its output item `item`.
  bool Emit(ResponseEventKind kind, int item, const std::string& text = "") {
    ResponseEvent e;
    e.kind = kind;
    e.sequence_number = seq_++;
    e.response = &resp_;
    if (item >= 0) {
      e.item = &resp_.output[static_cast<size_t>(item)];
      e.output_index = item;
    }
    e.text = text;
    return sink_.Write(SseNamedEvent(ResponseEventName(kind), EncodeResponseEvent(e)));
  }

  bool Append(ResponseItemType type, const std::string& text) {
    const bool reasoning = type == ResponseItemType::kReasoning;
    if (!open_ || resp_.output.back().type != type) {
      if (!Close("completed")) return false;
      ResponseItem item = NewItem(p_, type);
      item.status = "in_progress";
      resp_.output.push_back(std::move(item));
      open_ = true;
      if (!Emit(ResponseEventKind::kItemAdded, Last()) ||
          !Emit(reasoning ? ResponseEventKind::kSummaryPartAdded
                          : ResponseEventKind::kContentPartAdded,
                Last()))
        return false;
    }
    resp_.output.back().text += text;
    return Emit(reasoning ? ResponseEventKind::kSummaryDelta : ResponseEventKind::kTextDelta,
                Last(), text);
  }

  // Ends the open reasoning or message item with `status`.
  bool Close(const char* status) {
    if (!open_) return true;
    open_ = false;
    ResponseItem& item = resp_.output.back();
    item.status = status;
    const std::string text = item.text;
    const bool reasoning = item.type == ResponseItemType::kReasoning;
    return Emit(reasoning ? ResponseEventKind::kSummaryDone : ResponseEventKind::kTextDone, Last(),
                text) &&
           Emit(reasoning ? ResponseEventKind::kSummaryPartDone
                          : ResponseEventKind::kContentPartDone,
                Last(), text) &&
           Emit(ResponseEventKind::kItemDone, Last());
  }

  StreamSink& sink_;
  ChatPipeline& p_;
  ResponseObject resp_;
  int64_t seq_ = 0;
  bool open_ = false;  // the last output item is a reasoning or message item still growing
};

// The items a stream of the same pieces opens: a piece's reasoning or text extends the last item
// when it is of the same kind; each call is an item of its own.
ResponseObject WholeResponse(ChatPipeline& p, ResponseObject r, const ChatOutcome& o) {
  auto extend = [&](ResponseItemType type, const std::string& text) {
    if (text.empty()) return;
    if (r.output.empty() || r.output.back().type != type) r.output.push_back(NewItem(p, type));
    r.output.back().text += text;
  };
  for (const Choice& piece : o.pieces) {
    extend(ResponseItemType::kReasoning, piece.reasoning);
    extend(ResponseItemType::kMessage, piece.text);
    for (const ToolCallOut& t : piece.tool_calls) r.output.push_back(CallItem(p, t));
  }
  // A message cut by max_output_tokens is incomplete (as the stream closes it).
  if (Truncated(o) && !r.output.empty() && r.output.back().type == ResponseItemType::kMessage)
    r.output.back().status = "incomplete";
  SetEnd(o, &r);
  return r;
}

}  // namespace

HttpResponse HandleResponses(ChatPipeline& p, const HttpRequest& req) {
  ResponsesRequest rr;
  std::string param;
  if (Status s = ParseResponsesRequest(req.body, p.limits(), &rr, &param); !s.ok())
    return Error(s, param);
  const bool stream = rr.chat.gen.stream;
  PipelineError err;
  std::optional<RunningChat> run =
      StartChat(p, std::move(rr.chat), "", "input", req.client_gone, &err);
  if (!run) return Error(err.status, err.param, err.code);
  ResponseObject head;
  head.id = p.NewId("resp_");
  head.created_at = static_cast<int64_t>(std::time(nullptr));
  head.model = p.model_id();
  head.echo = std::move(rr.echo);
  if (!stream) {
    Result<ChatOutcome> out = CollectChat(p, *run);
    if (!out.ok()) return Error(out.error());
    return JsonResponse(EncodeResponse(WholeResponse(p, std::move(head), *out)));
  }
  HttpResponse r;
  r.content_type = std::string(kSseContentType);
  auto shared = std::make_shared<RunningChat>(std::move(*run));
  ChatPipeline* pipeline = &p;  // owned by the server, which outlives its HTTP workers
  r.stream = [pipeline, shared, head](StreamSink& sink) {
    ResponseStream listener(sink, *pipeline, head);
    if (listener.Begin()) StreamChat(*pipeline, *shared, listener);
  };
  return r;
}

}  // namespace kvforge::server
