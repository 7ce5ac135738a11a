// server/anthropic_api.h — Anthropic's Messages API over the chat pipeline: POST /v1/messages
// (a message, or its stream of typed SSE events: message_start, content_block_start/delta/stop,
// ping, message_delta, message_stop; error mid-stream) and POST /v1/messages/count_tokens.
// Errors have Anthropic's shape ({"type": "error", "error": {"type", "message"}}).
// Thread-safety: the handlers run concurrently on the HTTP workers.
#pragma once

#include "server/chat_pipeline.h"
#include "server/http_transport.h"

namespace kvforge::server {

HttpResponse HandleMessages(ChatPipeline& p, const HttpRequest& req);
HttpResponse HandleCountTokens(ChatPipeline& p, const HttpRequest& req);

}  // namespace kvforge::server
