#include "router/router_codec.h"

#include <nlohmann/json.hpp>

namespace kvforge::router {

using nlohmann::json;

namespace {

void AppendContent(const json& content, std::string* out) {
  if (content.is_string()) {
    *out += content.get<std::string>();
  } else if (content.is_array()) {  // [{"type":"text","text":...}, ...]
    for (const json& part : content)
      if (part.is_object() && part.contains("text") && part["text"].is_string())
        *out += part["text"].get<std::string>();
  }
}

}  // namespace

RoutingKey ReadRoutingKey(std::string_view body) {
  RoutingKey key;
  const json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return key;
  if (auto s = j.find("stream"); s != j.end() && s->is_boolean()) key.stream = s->get<bool>();
  if (auto p = j.find("prompt"); p != j.end()) {
    if (p->is_string()) {
      key.text = p->get<std::string>();
    } else if (p->is_array() && !p->empty() && (*p)[0].is_string()) {
      key.text = (*p)[0].get<std::string>();  // a batch routes by its first prompt
    } else if (p->is_array()) {
      for (const json& id : *p)  // token ids: their decimal text is as good a key
        if (id.is_number_integer()) key.text += std::to_string(id.get<int64_t>()) + " ";
    }
  }
  if (auto m = j.find("messages"); m != j.end() && m->is_array()) {
    for (const json& msg : *m) {
      if (!msg.is_object()) continue;
      if (auto r = msg.find("role"); r != msg.end() && r->is_string())
        key.text += "<" + r->get<std::string>() + ">";
      if (auto c = msg.find("content"); c != msg.end()) AppendContent(*c, &key.text);
    }
  }
  return key;
}

std::string ErrorJson(const std::string& message, const std::string& type, int code) {
  json j = {{"error", {{"message", message}, {"type", type}, {"code", code}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string WorkersJson(const std::vector<WorkerReport>& workers, const char* policy) {
  json list = json::array();
  for (const WorkerReport& w : workers)
    list.push_back({{"url", w.url},
                    {"healthy", w.healthy},
                    {"in_flight", w.in_flight},
                    {"requests", w.requests},
                    {"routed_by_cache", w.by_cache},
                    {"failures", w.failures}});
  return json{{"policy", policy}, {"workers", list}}.dump();
}

}  // namespace kvforge::router
