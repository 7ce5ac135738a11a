// server/anthropic_api.cc — see anthropic_api.h.
#include "server/anthropic_api.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/anthropic_codec.h"
#include "server/routes.h"
#include "server/sse.h"

namespace kvforge::server {
namespace {

HttpResponse Error(const Status& s, const std::string& param = "") {
  return AnthropicErrorResponse(ErrorFromStatus(s, param));
}

std::string StopReason(const ChatOutcome& o) {
  if (o.finish_reason == "tool_calls") return "tool_use";
  if (o.finish_reason == "length") return "max_tokens";
  return o.stop_string.empty() ? "end_turn" : "stop_sequence";
}

// Anthropic's ids of tool uses read "toolu_..."; Mistral's 9-character ids stay as they are,
// since its templates refuse any other form when the id comes back in a tool_result.
std::string ToolUseId(const std::string& call_id) {
  static constexpr std::string_view kCall = "call_";
  return call_id.compare(0, kCall.size(), kCall) == 0 ? "toolu_" + call_id.substr(kCall.size())
                                                      : call_id;
}

AnthropicBlock ToolUseBlock(const ToolCallOut& t) {
  AnthropicBlock b;
  b.type = AnthropicBlockType::kToolUse;
  b.id = ToolUseId(t.id);
  b.name = t.name;
  b.input_json = t.arguments;
  return b;
}

AnthropicBlock TextBlock(AnthropicBlockType type, const std::string& text) {
  AnthropicBlock b;
  b.type = type;
  b.text = text;
  return b;
}

void SetEnd(const ChatOutcome& o, AnthropicMessage* m) {
  m->stop_reason = StopReason(o);
  if (m->stop_reason == "stop_sequence") m->stop_sequence = o.stop_string;
  m->usage = o.usage;
}

// The stream of one message: each settled piece extends the open content block when it is of
// the same kind, or closes it and opens the next.
class MessageStream final : public ReplyListener {
 public:
  MessageStream(StreamSink& sink, AnthropicMessage head) : sink_(sink), msg_(std::move(head)) {}

  bool Started(const Usage& prompt_usage) override {
    started_ = true;
    msg_.usage = prompt_usage;
    return Write("message_start", EncodeAnthropicMessageStart(msg_)) &&
           Write("ping", EncodeAnthropicPing());
  }

  bool Piece(const Choice& piece) override {
    if (!piece.reasoning.empty() && !Append(AnthropicBlockType::kThinking, piece.reasoning))
      return false;
    if (!piece.text.empty() && !Append(AnthropicBlockType::kText, piece.text)) return false;
    for (const ToolCallOut& t : piece.tool_calls) {
      // A call is handed out whole: its block opens and carries all its input at once (it closes
      // when the next block opens, or at the end).
      const AnthropicBlock b = ToolUseBlock(t);
      if (!Close() || !Open(b) ||
          !Write("content_block_delta", EncodeAnthropicBlockDelta(index_, b)))
        return false;
    }
    return true;
  }

  bool Finished(const ChatOutcome& outcome) override {
    if (!Close()) return false;
    SetEnd(outcome, &msg_);
    return Write("message_delta", EncodeAnthropicMessageDelta(msg_)) &&
           Write("message_stop", EncodeAnthropicMessageStop());
  }

  bool KeepAlive() override {
    // Before message_start only a comment may go (Anthropic's streams open with it).
    return started_ ? Write("ping", EncodeAnthropicPing()) : sink_.Write(kSseKeepAlive);
  }

  void Failed(const Status& status) override {
    (void)Write("error", EncodeAnthropicError(ErrorFromStatus(status)));
  }

 private:
  bool Write(std::string_view event, const std::string& payload) {
    return sink_.Write(SseNamedEvent(event, payload));
  }

  bool Open(const AnthropicBlock& b) {
    ++index_;
    open_ = true;
    open_type_ = b.type;
    return Write("content_block_start", EncodeAnthropicBlockStart(index_, b));
  }

  bool Close() {
    if (!open_) return true;
    open_ = false;
    return Write("content_block_stop", EncodeAnthropicBlockStop(index_));
  }

  bool Append(AnthropicBlockType type, const std::string& text) {
    const AnthropicBlock piece = TextBlock(type, text);
    if (!open_ || open_type_ != type) {
      if (!Close() || !Open(piece)) return false;
    }
    return Write("content_block_delta", EncodeAnthropicBlockDelta(index_, piece));
  }

  StreamSink& sink_;
  AnthropicMessage msg_;
  bool started_ = false;
  bool open_ = false;
  AnthropicBlockType open_type_ = AnthropicBlockType::kText;
  int32_t index_ = -1;
};

// The blocks a stream of the same pieces opens: a piece's reasoning or text extends the last
// block when it is of the same kind; each call is a block of its own.
void AddPiece(const Choice& piece, std::vector<AnthropicBlock>* blocks) {
  auto extend = [blocks](AnthropicBlockType type, const std::string& text) {
    if (text.empty()) return;
    if (!blocks->empty() && blocks->back().type == type)
      blocks->back().text += text;
    else
      blocks->push_back(TextBlock(type, text));
  };
  extend(AnthropicBlockType::kThinking, piece.reasoning);
  extend(AnthropicBlockType::kText, piece.text);
  for (const ToolCallOut& t : piece.tool_calls) blocks->push_back(ToolUseBlock(t));
}

AnthropicMessage WholeMessage(AnthropicMessage m, const ChatOutcome& o) {
  for (const Choice& piece : o.pieces) AddPiece(piece, &m.content);
  SetEnd(o, &m);
  return m;
}

}  // namespace

HttpResponse HandleMessages(ChatPipeline& p, const HttpRequest& req) {
  MessagesRequest mr;
  std::string param;
  if (Status s = ParseMessagesRequest(req.body, p.limits(), false, &mr, &param); !s.ok())
    return Error(s, param);
  const bool stream = mr.chat.gen.stream;
  PipelineError err;
  std::optional<RunningChat> run =
      StartChat(p, std::move(mr.chat), mr.prefill, "messages", req.client_gone, &err);
  if (!run) return Error(err.status, err.param);
  AnthropicMessage head;
  head.id = p.NewId("msg_");
  head.model = p.model_id();
  if (!stream) {
    Result<ChatOutcome> out = CollectChat(p, *run);
    if (!out.ok()) return Error(out.error());
    return JsonResponse(EncodeAnthropicMessage(WholeMessage(std::move(head), *out)));
  }
  HttpResponse r;
  r.content_type = std::string(kSseContentType);
  auto shared = std::make_shared<RunningChat>(std::move(*run));
  ChatPipeline* pipeline = &p;  // owned by the server, which outlives its HTTP workers
  r.stream = [pipeline, shared, head](StreamSink& sink) {
    MessageStream listener(sink, head);
    StreamChat(*pipeline, *shared, listener);
  };
  return r;
}

HttpResponse HandleCountTokens(ChatPipeline& p, const HttpRequest& req) {
  MessagesRequest mr;
  std::string param;
  if (Status s = ParseMessagesRequest(req.body, p.limits(), true, &mr, &param); !s.ok())
    return Error(s, param);
  if (Status s = p.CheckModel(mr.chat.gen.model); !s.ok()) return Error(s, "model");
  Result<std::vector<int32_t>> ids = ChatPromptIds(p, mr.chat.chat, mr.prefill);
  if (!ids.ok()) return Error(ids.error(), "messages");
  return JsonResponse(EncodeAnthropicTokenCount(static_cast<int64_t>(ids->size())));
}

}  // namespace kvforge::server
