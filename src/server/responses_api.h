// server/responses_api.h — OpenAI's Responses API over the chat pipeline: POST /v1/responses (a
// response object, or its stream of typed SSE events from response.created to
// response.completed / response.incomplete; an `error` event mid-stream). Errors have OpenAI's
// shape. Nothing is stored.
// Thread-safety: the handler runs concurrently on the HTTP workers.
#pragma once

#include "server/chat_pipeline.h"
#include "server/http_transport.h"

namespace kvforge::server {

HttpResponse HandleResponses(ChatPipeline& p, const HttpRequest& req);

}  // namespace kvforge::server
