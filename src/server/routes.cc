#include "server/routes.h"

#include <utility>

#include "server/anthropic_codec.h"
#include "server/openai_codec.h"

namespace kvforge::server {

ApiError ErrorFromStatus(const Status& status, const std::string& param) {
  ApiError e;
  e.message = status.message();
  e.param = param;
  switch (status.code()) {
    case StatusCode::kOk:
      e.http_status = 200;
      break;
    case StatusCode::kInvalidArgument:
      e.http_status = 400;
      break;
    case StatusCode::kNotFound:
      e.http_status = 404;
      e.code = "not_found";
      break;
    case StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "rate_limit_exceeded";
      break;
    case StatusCode::kUnimplemented:
      e.http_status = 501;
      e.code = "not_implemented";
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled:
      e.http_status = 503;
      e.type = "server_error";
      e.code = "service_unavailable";
      break;
    case StatusCode::kDataLoss:
    case StatusCode::kInternal:
    case StatusCode::kIoError:
      e.http_status = 500;
      e.type = "server_error";
      e.code = "internal_error";
      break;
  }
  return e;
}

HttpResponse ErrorResponse(const ApiError& error) {
  HttpResponse r;
  r.status = error.http_status;
  r.body = EncodeError(error);
  if (error.http_status == 429 || error.http_status == 503)
    r.headers.emplace_back("Retry-After", "1");
  return r;
}

HttpResponse AnthropicErrorResponse(const ApiError& error) {
  HttpResponse r = ErrorResponse(error);
  r.body = EncodeAnthropicError(error);
  return r;
}

HttpResponse JsonResponse(std::string body, int status) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

namespace {

// Constant time per byte of the key, so the comparison does not tell how much of a guess is right.
bool SameKey(std::string_view given, const std::string& key) {
  unsigned diff = given.size() == key.size() ? 0u : 1u;
  for (size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(key[i]) ^
            static_cast<unsigned char>(i < given.size() ? given[i] : 0);
  return diff == 0;
}

}  // namespace

bool HasBearerKey(const HttpRequest& request, const std::string& key) {
  const std::string auth = request.Header("Authorization");
  static constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() < kBearer.size() || auth.compare(0, kBearer.size(), kBearer) != 0) return false;
  return SameKey(std::string_view(auth).substr(kBearer.size()), key);
}

bool HasAnthropicKey(const HttpRequest& request, const std::string& key) {
  const std::string given = request.Header("x-api-key");
  return given.empty() ? HasBearerKey(request, key) : SameKey(given, key);
}

namespace {

// Which API's conventions a route follows for its key and its errors.
enum class ApiShape { kOpenAi, kAnthropic };

bool HasKey(ApiShape shape, const HttpRequest& req, const std::string& key) {
  return shape == ApiShape::kAnthropic ? HasAnthropicKey(req, key) : HasBearerKey(req, key);
}

HttpResponse Unauthorized(ApiShape shape) {
  ApiError e;
  e.http_status = 401;
  e.code = "invalid_api_key";
  HttpResponse r;
  if (shape == ApiShape::kAnthropic) {
    e.message = "missing or incorrect API key: send the header 'x-api-key: <key>'";
    r = AnthropicErrorResponse(e);
  } else {
    e.message = "missing or incorrect API key: send the header 'Authorization: Bearer <key>'";
    r = ErrorResponse(e);
  }
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

HttpHandler Wrap(HttpHandler handler, bool needs_key, const std::string& api_key,
                 const StatusObserver& observer, ApiShape shape = ApiShape::kOpenAi) {
  return
      [handler = std::move(handler), needs_key, api_key, observer, shape](const HttpRequest& req) {
        HttpResponse r = needs_key && !api_key.empty() && !HasKey(shape, req, api_key)
                             ? Unauthorized(shape)
                             : handler(req);
        if (observer) observer(r.status);
        return r;
      };
}

}  // namespace

std::vector<HttpRoute> BuildRoutes(const Endpoints& endpoints, const std::string& api_key,
                                   const StatusObserver& observer) {
  std::vector<HttpRoute> routes = {
      {"POST", "/v1/completions", Wrap(endpoints.completions, true, api_key, observer)},
      {"POST", "/v1/chat/completions", Wrap(endpoints.chat_completions, true, api_key, observer)},
      {"GET", "/v1/models", Wrap(endpoints.models, true, api_key, observer)},
      {"GET", "/health", Wrap(endpoints.health, false, api_key, observer)},
      {"GET", "/metrics", Wrap(endpoints.metrics, false, api_key, observer)},
      {"POST", "/tokenize", Wrap(endpoints.tokenize, true, api_key, observer)},
      {"POST", "/detokenize", Wrap(endpoints.detokenize, true, api_key, observer)},
  };
  if (endpoints.kv_snapshot)
    routes.push_back(
        {"GET", "/v1/kvforge/kv", Wrap(endpoints.kv_snapshot, true, api_key, observer)});
  if (endpoints.kv_history)
    routes.push_back(
        {"GET", "/v1/kvforge/history", Wrap(endpoints.kv_history, true, api_key, observer)});
  if (endpoints.webui)
    routes.push_back({"GET", "/", Wrap(endpoints.webui, false, api_key, observer)});
  if (endpoints.messages)
    routes.push_back({"POST", "/v1/messages",
                      Wrap(endpoints.messages, true, api_key, observer, ApiShape::kAnthropic)});
  if (endpoints.messages_count_tokens)
    routes.push_back(
        {"POST", "/v1/messages/count_tokens",
         Wrap(endpoints.messages_count_tokens, true, api_key, observer, ApiShape::kAnthropic)});
  if (endpoints.responses)
    routes.push_back({"POST", "/v1/responses", Wrap(endpoints.responses, true, api_key, observer)});
  return routes;
}

HttpErrorBuilder MakeErrorBuilder(const StatusObserver& observer) {
  return [observer](int status, const std::string& message) {
    ApiError e;
    e.http_status = status;
    e.message = message;
    switch (status) {
      case 404:
        e.code = "not_found";
        break;
      case 405:
        e.code = "method_not_allowed";
        break;
      case 413:
        e.code = "payload_too_large";
        break;
      case 415:
        e.code = "unsupported_media_type";
        break;
      default:
        if (status >= 500) {
          e.type = "server_error";
          e.code = "internal_error";
        }
        break;
    }
    if (observer) observer(status);
    return ErrorResponse(e);
  };
}

}  // namespace kvforge::server
