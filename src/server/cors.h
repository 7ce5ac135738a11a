// server/cors.h — Cross-Origin Resource Sharing: which browser origins may call the API, and the
// headers that tell the browser so (https://fetch.spec.whatwg.org/#http-cors-protocol).
//
// Off unless origins are configured (`--allowed-origins`). With it on, a request carrying an
// allowed Origin gets Access-Control-Allow-Origin (the origin itself, so credentials can work) and
// Vary: Origin on every response, errors included; a preflight (OPTIONS with
// Access-Control-Request-Method) from an allowed origin is answered 204 with the methods and
// headers allowed, from any other origin 403. Pure functions; the transport applies them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvforge/status.h"
#include "server/http_transport.h"

namespace kvforge::server {

struct CorsPolicy {
  std::vector<std::string> origins;  // "scheme://host[:port]" or "*" (any); empty: CORS off
  std::vector<std::string> methods = {"GET", "POST", "OPTIONS"};  // "*": any
  std::vector<std::string> headers = {"*"};  // request headers allowed; "*": what is asked
  bool allow_credentials = false;
  int max_age_s = 600;  // how long a browser may cache a preflight answer
  bool enabled() const { return !origins.empty(); }
};

bool OriginAllowed(const CorsPolicy& policy, std::string_view origin);
// Headers for a response to a request from `origin` ("" when the request had none): empty when
// CORS is off or the origin is not allowed.
HttpHeaders CorsResponseHeaders(const CorsPolicy& policy, std::string_view origin);
// Whether a request is a CORS preflight: OPTIONS with Origin and Access-Control-Request-Method.
bool IsPreflight(const HttpRequest& request);
// The answer to a preflight (status 204, or 403 for an origin or method not allowed), without
// the CorsResponseHeaders the transport adds to every response.
HttpResponse PreflightResponse(const CorsPolicy& policy, const HttpRequest& request);

}  // namespace kvforge::server
