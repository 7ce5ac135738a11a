#include "server/cors.h"

#include <strings.h>

#include <algorithm>

#include "base/strings.h"
#include "kvforge/server.h"

namespace kvforge::server {

namespace {

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

bool Listed(const std::vector<std::string>& list, std::string_view v, bool case_insensitive) {
  return std::any_of(list.begin(), list.end(), [&](const std::string& e) {
    return e == "*" || (case_insensitive ? EqualsNoCase(e, v) : e == v);
  });
}

std::string Join(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& e : list) out += (out.empty() ? "" : ", ") + e;
  return out;
}

}  // namespace

Result<std::vector<std::string>> ParseCorsFlagList(std::string_view text, std::string_view flag) {
  std::string body = Trim(text);
  if (body.size() >= 2 && body.front() == '[' && body.back() == ']')
    body = body.substr(1, body.size() - 2);
  std::vector<std::string> out;
  if (Trim(body).empty()) return out;  // [] or "": off
  size_t start = 0;
  while (start <= body.size()) {
    const size_t comma = std::min(body.find(',', start), body.size());
    std::string item = Trim(std::string_view(body).substr(start, comma - start));
    if (item.size() >= 2 && (item.front() == '"' || item.front() == '\'') &&
        item.back() == item.front())
      item = item.substr(1, item.size() - 2);
    if (item.empty())
      return Status::InvalidArgument(base::StrFormat("--%.*s: an empty entry in '%.*s'",
                                                     (int)flag.size(), flag.data(),
                                                     (int)text.size(), text.data()));
    if (item.find_first_of("\"'\r\n") != std::string::npos)
      return Status::InvalidArgument(base::StrFormat("--%.*s: a malformed entry '%s'",
                                                     (int)flag.size(), flag.data(), item.c_str()));
    out.push_back(std::move(item));
    start = comma + 1;
  }
  return out;
}

bool OriginAllowed(const CorsPolicy& policy, std::string_view origin) {
  // Origins compare exactly (scheme, host and port as the browser serialises them).
  return !origin.empty() && Listed(policy.origins, origin, /*case_insensitive=*/false);
}

HttpHeaders CorsResponseHeaders(const CorsPolicy& policy, std::string_view origin) {
  HttpHeaders h;
  if (!policy.enabled()) return h;
  h.emplace_back("Vary", "Origin");  // the answer depends on the Origin: caches must key on it
  if (!OriginAllowed(policy, origin)) return h;
  h.emplace_back("Access-Control-Allow-Origin", std::string(origin));
  if (policy.allow_credentials) h.emplace_back("Access-Control-Allow-Credentials", "true");
  return h;
}

bool IsPreflight(const HttpRequest& request) {
  return request.method == "OPTIONS" && !request.Header("Origin").empty() &&
         !request.Header("Access-Control-Request-Method").empty();
}

HttpResponse PreflightResponse(const CorsPolicy& policy, const HttpRequest& request) {
  const std::string origin = request.Header("Origin");
  const std::string method = request.Header("Access-Control-Request-Method");
  HttpResponse r;  // the transport adds CorsResponseHeaders, as to every response
  if (!OriginAllowed(policy, origin) || !Listed(policy.methods, method, false)) {
    r.status = 403;
    r.body = OriginAllowed(policy, origin)
                 ? "{\"error\":{\"message\":\"CORS: method not allowed\",\"type\":"
                   "\"invalid_request_error\",\"param\":null,\"code\":\"cors_forbidden\"}}"
                 : "{\"error\":{\"message\":\"CORS: origin not allowed\",\"type\":"
                   "\"invalid_request_error\",\"param\":null,\"code\":\"cors_forbidden\"}}";
    return r;
  }
  r.status = 204;
  r.content_type.clear();
  const bool any_method =
      std::find(policy.methods.begin(), policy.methods.end(), "*") != policy.methods.end();
  r.headers.emplace_back("Access-Control-Allow-Methods",
                         any_method ? method : Join(policy.methods));
  const std::string asked = request.Header("Access-Control-Request-Headers");
  const bool any_header =
      std::find(policy.headers.begin(), policy.headers.end(), "*") != policy.headers.end();
  const std::string allowed = any_header ? asked : Join(policy.headers);
  if (!allowed.empty()) r.headers.emplace_back("Access-Control-Allow-Headers", allowed);
  r.headers.emplace_back("Access-Control-Max-Age", std::to_string(policy.max_age_s));
  return r;
}

}  // namespace kvforge::server
