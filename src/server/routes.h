// server/routes.h — the endpoint table, API-key checks, and the one Status -> HTTP mapping.
//
// BuildRoutes wraps each endpoint handler with the API-key check (when a key is configured,
// every endpoint except GET /health and GET /metrics needs "Authorization: Bearer KEY", which
// the Anthropic endpoints also take as "x-api-key: KEY") and
// reports every response status to an observer (the kvforge_http_requests_total counter).
// ErrorFromStatus is the single place where a kvforge Status becomes an HTTP status and an
// OpenAI error type; errors the transport raises itself go through MakeErrorBuilder.
// Thread-safety: pure functions; the built handlers may run concurrently.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kvforge/status.h"
#include "server/api_types.h"
#include "server/http_transport.h"

namespace kvforge::server {

// kInvalidArgument -> 400, kNotFound -> 404, kResourceExhausted -> 429, kUnavailable and
// kCancelled -> 503, kUnimplemented -> 501, anything else -> 500. `param` is copied through.
ApiError ErrorFromStatus(const Status& status, const std::string& param = "");

// The response carrying an error as {"error": {...}}.
HttpResponse ErrorResponse(const ApiError& error);
// The same error in Anthropic's shape ({"type": "error", "error": {"type", "message"}}), for
// /v1/messages and /v1/messages/count_tokens.
HttpResponse AnthropicErrorResponse(const ApiError& error);
HttpResponse JsonResponse(std::string body, int status = 200);

// Checks "Authorization: Bearer <key>" in constant time (per byte of the key).
bool HasBearerKey(const HttpRequest& request, const std::string& key);
// Anthropic's clients send "x-api-key: <key>" instead: either header passes (constant time too).
bool HasAnthropicKey(const HttpRequest& request, const std::string& key);

struct Endpoints {
  HttpHandler completions;       // POST /v1/completions
  HttpHandler chat_completions;  // POST /v1/chat/completions
  HttpHandler models;            // GET /v1/models
  HttpHandler health;            // GET /health (never needs the key)
  HttpHandler metrics;           // GET /metrics (never needs the key)
  HttpHandler tokenize;          // POST /tokenize
  HttpHandler detokenize;        // POST /detokenize
  HttpHandler kv_snapshot;       // GET /v1/kvforge/kv (the inspector's snapshot)
  HttpHandler kv_history;        // GET /v1/kvforge/history (the inspector's charts)
  HttpHandler webui;             // GET / (the page; never needs the key: it asks for it); unset:
                                 // no page (--no-webui), GET / is a 404
  // The other API shapes (unset: not served). The Anthropic ones take x-api-key or the bearer
  // key, and answer in Anthropic's error shape.
  HttpHandler messages;               // POST /v1/messages
  HttpHandler messages_count_tokens;  // POST /v1/messages/count_tokens
  HttpHandler responses;              // POST /v1/responses
};

using StatusObserver = std::function<void(int http_status)>;

std::vector<HttpRoute> BuildRoutes(const Endpoints& endpoints, const std::string& api_key,
                                   const StatusObserver& observer);
// Error bodies for statuses the transport produces (404, 405, 413, ...), also observed.
HttpErrorBuilder MakeErrorBuilder(const StatusObserver& observer);

}  // namespace kvforge::server
