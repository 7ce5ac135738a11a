// router/router_codec.h — the little JSON the router reads and writes (nlohmann/json is included
// by router_codec.cc only): the text a request's KV depends on, and its own replies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvforge::router {

struct RoutingKey {
  std::string text;     // the prompt, or the chat messages' roles and contents in order
  bool stream = false;  // "stream": true
};
// Never fails: a body the router cannot read routes with empty text (the worker answers it).
RoutingKey ReadRoutingKey(std::string_view body);

// {"error":{"message":..., "type":..., "code":...}} — the OpenAI error shape.
std::string ErrorJson(const std::string& message, const std::string& type, int code);

struct WorkerReport {
  std::string url;
  bool healthy = false;
  int64_t in_flight = 0;
  int64_t requests = 0;
  int64_t by_cache = 0;
  int64_t failures = 0;
};
std::string WorkersJson(const std::vector<WorkerReport>& workers, const char* policy);

}  // namespace kvforge::router
